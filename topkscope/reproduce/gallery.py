"""`python -m topkscope.reproduce.gallery`: small copies of the figures for the README.

Reads <results>/figures/*.png and <results>/claims.md, writes <out>/*.png (at most `width`
pixels wide, 256-colour PNG) and <out>/README.md: every figure with its caption from index entries, then the
claims table as measured. Committed under docs/gallery/ so the README shows real results.
With --readme, the findings table between the README's claims-table markers is regenerated
from <results>/claims.csv (findings.findings_markdown): no hand-written verdicts.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from PIL import Image

from topkscope.io import atomic_write, write_bytes_atomic

MAX_WIDTH = 900


def shrink(src: Path, dst: Path, width: int = MAX_WIDTH) -> Path:
    """A copy of the PNG src at most `width` pixels wide (aspect kept), written atomically."""
    if width < 64:
        raise ValueError(f"width = {width} is too small; allowed: 64 pixels or more")
    with Image.open(src) as img:
        img = img.convert("RGB")
        if img.width > width:
            img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
        img = img.quantize(colors=256)  # a palette PNG: a third of the size, same look for plots
        atomic_write(dst, lambda tmp: img.save(tmp, format="PNG", optimize=True))
    return dst


def captions_from_index(index_md: str) -> dict[str, str]:
    """{figure name: caption} parsed from results/figures/index.md."""
    out: dict[str, str] = {}
    for block in re.split(r"\n### ", index_md)[1:]:
        name, _, rest = block.partition("\n")
        paras = [p.strip() for p in rest.split("\n\n") if p.strip() and not p.strip().startswith("!")]
        if paras:
            out[name.strip()] = re.sub(r"\s*\(\[png\].*\)\s*$", "", paras[0])
    return out


def build(results: Path, out: Path, width: int = MAX_WIDTH) -> list[Path]:
    figures = Path(results) / "figures"
    pngs = sorted(figures.glob("*.png"))
    if not pngs:
        raise ValueError(f"no figures in {figures}: run `make reproduce-figures` first")
    index = figures / "index.md"
    captions = captions_from_index(index.read_text()) if index.exists() else {}
    order = {name: i for i, name in enumerate(captions)}  # index order: experiment by experiment
    pngs.sort(key=lambda p: (order.get(p.stem, len(order)), p.stem))
    written = [shrink(p, Path(out) / p.name, width) for p in pngs]
    lines = ["# Gallery (quick profile, as measured)", "",
             "Regenerate with `make reproduce-figures && make gallery`.", ""]
    for p in written:
        lines += [f"### {p.stem}", "", f"![{p.stem}]({p.name})", ""]
        if p.stem in captions:
            lines += [captions[p.stem], ""]
    claims = Path(results) / "claims.md"
    if claims.exists():
        lines += ["## Claims table", "", claims.read_text().strip(), ""]
    write_bytes_atomic(Path(out) / "README.md", "\n".join(lines).encode())
    return written


def update_readme(readme: Path, claims_csv: Path) -> None:
    """Rewrite readme's findings table (between the claims-table markers) from claims_csv."""
    import pandas as pd

    from topkscope.reproduce.findings import replace_findings

    if not Path(claims_csv).is_file():
        raise ValueError(f"no claims table at {claims_csv}: run `make reproduce-figures` first")
    text = replace_findings(Path(readme).read_text(), pd.read_csv(claims_csv))
    write_bytes_atomic(Path(readme), text.encode())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m topkscope.reproduce.gallery", description=__doc__)
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--out", type=Path, default=Path("docs/gallery"))
    p.add_argument("--width", type=int, default=MAX_WIDTH)
    p.add_argument("--readme", type=Path, default=None,
                   help="regenerate this README's findings table from <results>/claims.csv")
    args = p.parse_args(argv)
    try:
        written = build(args.results, args.out, args.width)
        if args.readme is not None:
            update_readme(args.readme, Path(args.results) / "claims.csv")
    except (ValueError, OSError) as exc:
        print(f"gallery: error: {exc}", file=sys.stderr)
        return 2
    print(f"gallery: {len(written)} figures in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
