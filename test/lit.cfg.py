# lit configuration of mt's tests: mtc, mt-opt and LLVM's FileCheck/not on PATH.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "mt"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "Corpus", "AdamWTest.cpp", "UpdateQueueTest.cpp", "OverlappedUpdatesTest.cpp", "RendezvousTest.cpp", "DataParallelTest.cpp", "MatmulTest.cpp", "PinnedMemoryTest.cpp"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mt_obj_root, "test")

llvm_config.use_default_substitutions()

# GPU tests run where the CUDA backend was built and a device answers; elsewhere (CI) they
# are reported as unsupported.
import shutil
import subprocess
if config.gpu_tests and shutil.which("nvidia-smi") and \
        subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
    config.available_features.add("cuda-device")
# The host's vector units, so that each of CPU AdamW's paths runs where the CPU has it.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = cpuinfo.read().split()
except OSError:
    flags = []
for unit, flag in (("avx2", "avx2"), ("avx512", "avx512f")):
    if flag in flags:
        config.available_features.add(unit)
for test in ("mt-gpu-matmul-test", "mt-gpu-pinned-test", "mt-gpu-data-parallel-test",
             "mt-gpu-device-adamw-test"):
    folder = "Fuzz" if test.startswith("mt-fuzz") else ""
    config.substitutions.append(
        ("%" + test, os.path.join(config.mt_obj_root, "test", folder, test)))
config.substitutions.append(("%fixtures", config.fixtures_dir))
# A tool's path where a script (not the shell) runs it.
config.substitutions.append(("%mt-run", os.path.join(config.mt_obj_root, "tools", "mt-run")))
config.substitutions.append(("%mtc", os.path.join(config.mt_obj_root, "tools", "mtc")))
for test in ("mt-adamw-test", "mt-update-queue-test", "mt-gradient-ring-test", "mt-overlapped-updates-test", "mt-rendezvous-test",
             "mt-data-parallel-test", "mt-step-inputs-test",
             "mt-training-log-test", "mt-plan-loader-test", "mt-trainer-test", "mt-host-state-test", "mt-thread-pool-test",
             "mt-checkpoint-writer-test", "mt-step-profile-test", "mt-fuzz-plan",
             "mt-fuzz-tokens", "mt-fuzz-safetensors", "mt-fuzz-onnx", "mt-fuzz-onnx-text"):
    folder = "Fuzz" if test.startswith("mt-fuzz") else ""
    config.substitutions.append(
        ("%" + test, os.path.join(config.mt_obj_root, "test", folder, test)))
# Fixture scripts need Debian's python3 (torch, onnx), not the interpreter running lit.
config.substitutions = [(k, v) for k, v in config.substitutions if k != "%python"]
config.substitutions.append(("%python", "/usr/bin/python3"))
# The zoo's venv (torch and transformers from PyPI, scripts/make_zoo.sh), where a developer
# made it: tests that load mt's weights into transformers' models run there, not in CI.
zoo_python = os.path.join(os.path.dirname(config.test_source_root), ".zoo-venv", "bin", "python")
if os.path.exists(zoo_python) and subprocess.run(
        [zoo_python, "-c", "import transformers, safetensors"], capture_output=True).returncode == 0:
    config.available_features.add("zoo-venv")
config.substitutions.append(("%zoo-python", zoo_python))
# onnxruntime lives in the venv scripts/setup.sh --tests makes in the build folder.
config.substitutions.append(
    ("%ort-python", os.path.join(config.mt_obj_root, "test-venv", "bin", "python")))
llvm_config.add_tool_substitutions(
    ["mtc", "mt-opt", "mt-run"], [os.path.join(config.mt_obj_root, "tools")])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
