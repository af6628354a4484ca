# Draws the loss curve of an mt-run --metrics file into a PNG with nothing but the standard
# library (the demo must not need matplotlib): plot_loss.py METRICS.jsonl OUT.png
import json
import struct
import sys
import zlib

WIDTH, HEIGHT, MARGIN = 640, 400, 48
# 3x5 glyphs for the axis labels, one row of 3 bits each, top first.
GLYPHS = {
    "0": [7, 5, 5, 5, 7], "1": [2, 6, 2, 2, 7], "2": [7, 1, 7, 4, 7], "3": [7, 1, 7, 1, 7],
    "4": [5, 5, 7, 1, 1], "5": [7, 4, 7, 1, 7], "6": [7, 4, 7, 5, 7], "7": [7, 1, 1, 1, 1],
    "8": [7, 5, 7, 5, 7], "9": [7, 5, 7, 1, 7], ".": [0, 0, 0, 0, 2],
}


def png(pixels):
    rows = b"".join(b"\x00" + bytes(c for pixel in row for c in pixel) for row in pixels)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_loss.py METRICS.jsonl OUT.png")
    points = [(m["step"], m["loss"]) for m in map(json.loads, open(sys.argv[1]))]
    pixels = [[(255, 255, 255)] * WIDTH for _ in range(HEIGHT)]

    def put(x, y, color):
        if 0 <= x < WIDTH and 0 <= y < HEIGHT:
            pixels[y][x] = color

    def text(x, y, label, scale=2):
        for glyph in label:
            for row, bits in enumerate(GLYPHS.get(glyph, [0] * 5)):
                for column in range(3):
                    if bits >> (2 - column) & 1:
                        for dy in range(scale):
                            for dx in range(scale):
                                put(x + column * scale + dx, y + row * scale + dy, (0, 0, 0))
            x += 4 * scale

    left, right, top, bottom = MARGIN + 24, WIDTH - MARGIN // 2, MARGIN // 2, HEIGHT - MARGIN
    for x in range(left, right + 1):
        put(x, bottom, (0, 0, 0))
    for y in range(top, bottom + 1):
        put(left, y, (0, 0, 0))
    steps = [s for s, _ in points]
    losses = [l for _, l in points]
    low, high = min(losses), max(losses)
    span = (high - low) or 1.0
    last = max(steps[-1], 2)

    def to_pixel(step, loss):
        return (left + round((step - 1) / (last - 1) * (right - left)),
                bottom - round((loss - low) / span * (bottom - top)))

    previous = None
    for step, loss in points:
        x, y = to_pixel(step, loss)
        if previous:
            # Joins consecutive points with a line of single pixels.
            (px, py), n = previous, max(abs(x - previous[0]), abs(y - previous[1]), 1)
            for i in range(n + 1):
                put(px + (x - px) * i // n, py + (y - py) * i // n, (200, 40, 40))
        previous = (x, y)
    text(4, top, f"{high:.2f}")
    text(4, bottom - 10, f"{low:.2f}")
    text(left, bottom + 8, "1")
    text(right - 8 * len(str(last)), bottom + 8, str(last))
    with open(sys.argv[2], "wb") as out:
        out.write(png(pixels))
    print(f"{sys.argv[2]}: loss {losses[0]:.3f} at step 1 -> {losses[-1]:.3f} at step {steps[-1]}")


if __name__ == "__main__":
    main()
