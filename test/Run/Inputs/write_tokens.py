# Writes token files for mt-run's tests: write_tokens.py FORMAT OUT COUNT [FIRST_TOKEN]
# FORMAT is u16 (nanoGPT), u32 (raw uint32) or llmc (llm.c's 256-int32 header, uint16).
# Tokens are (7 * i + 3) % 96, the fixtures' vocabulary; FIRST_TOKEN replaces token 0.
import struct
import sys

fmt, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokens = [(7 * i + 3) % 96 for i in range(count)]
if len(sys.argv) > 4:
    tokens[5] = int(sys.argv[4])
with open(out, "wb") as f:
    if fmt == "llmc":
        f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
    width = "I" if fmt == "u32" else "H"
    f.write(struct.pack(f"<{count}{width}", *tokens))
