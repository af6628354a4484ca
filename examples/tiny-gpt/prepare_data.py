# Writes the demo's training text, generated from a small grammar (so it is free to ship and
# has structure a tiny model can learn), and its byte-level tokens as nanoGPT's uint16 file.
# Usage: prepare_data.py OUTDIR
import os
import random
import sys

SUBJECTS = ["the cat", "a small dog", "the old sailor", "my neighbour", "the quiet child",
            "a tired horse", "the baker", "our teacher", "the red fox", "a young bird"]
VERBS = ["watches", "follows", "finds", "carries", "remembers", "paints", "greets", "builds",
         "hides", "answers"]
OBJECTS = ["the river", "a wooden boat", "the yellow moon", "an empty house", "the long road",
           "a warm loaf of bread", "the winter garden", "a letter", "the bright lantern",
           "an old song"]
ENDINGS = ["at dawn", "in the rain", "every morning", "without a word", "before supper",
           "near the market", "with great care", "under the bridge", "all day long",
           "once again"]


def sentence(rng):
    text = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(ENDINGS)}"
    return text[0].upper() + text[1:] + "."


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: prepare_data.py OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    rng = random.Random(0)
    paragraphs = [" ".join(sentence(rng) for _ in range(rng.randint(3, 7))) for _ in range(2000)]
    text = "\n\n".join(paragraphs) + "\n"
    with open(os.path.join(outdir, "corpus.txt"), "w") as out:
        out.write(text)
    # Byte-level tokens: token id = byte value, so the vocabulary is 256.
    data = text.encode("utf-8")
    with open(os.path.join(outdir, "corpus.bin"), "wb") as out:
        for byte in data:
            out.write(byte.to_bytes(2, "little"))
    print(f"{outdir}/corpus.bin: {len(data)} byte tokens")


if __name__ == "__main__":
    main()
