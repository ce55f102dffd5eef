"""`topkscope gallery` (`make gallery`): small copies of the figures for the README.

Reads <results>/figures/*.png and <results>/claims.md, writes <out>/*.png (at most `width`
pixels wide, 256-colour PNG) and <out>/README.md: every figure with its caption from index entries, then the
claims table as measured. Committed under docs/gallery/ so the README shows real results.
With a README, the findings table between its claims-table markers is regenerated from
<results>/claims.csv (findings.findings_markdown, and its sentences between the claims-prose
markers: findings.findings_prose): no hand-written verdicts or numbers. A second claims table
(standard_claims: the standard profile's committed claims-standard.csv) fills the README's
standard-claims blocks the same way.

Partial results never shrink what is published silently: when <results> lacks a figure that
<out> holds, or the new findings lack a cell (a row's value) the README shows, publish refuses
with one line naming what would be lost, and writes nothing (allow_shrink=True publishes
them anyway and removes the gallery's figures the results no longer have). Everything is
prepared in memory first, so a refusal or a bad input leaves every file as it was.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from topkscope.io import write_bytes_atomic

MAX_WIDTH = 900
SHOWN = 5  # names listed in a refusal, then "and N more"


def shrunk_png(src: Path, width: int = MAX_WIDTH) -> bytes:
    """The PNG src at most `width` pixels wide (aspect kept), as 256-colour PNG bytes."""
    if width < 64:
        raise ValueError(f"width = {width} is too small; allowed: 64 pixels or more")
    with Image.open(src) as img:
        img = img.convert("RGB")
        if img.width > width:
            img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
        img = img.quantize(colors=256)  # a palette PNG: a third of the size, same look for plots
        buf = io.BytesIO()
        img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def captions_from_index(index_md: str) -> dict[str, str]:
    """{figure name: caption} parsed from results/figures/index.md."""
    out: dict[str, str] = {}
    for block in re.split(r"\n### ", index_md)[1:]:
        name, _, rest = block.partition("\n")
        paras = [p.strip() for p in rest.split("\n\n") if p.strip() and not p.strip().startswith("!")]
        if paras:
            out[name.strip()] = re.sub(r"\s*\(\[png\].*\)\s*$", "", paras[0])
    return out


@dataclass
class Gallery:
    """Every file publish() would write, prepared in memory: name -> bytes for <out>, the
    gallery README's text, and the README's new text (None without a README)."""

    pngs: dict[str, bytes]
    index: str
    readme: str | None = None


def prepare(results: Path, width: int = MAX_WIDTH, readme: Path | None = None,
            standard_claims: Path | None = None) -> Gallery:
    """The gallery of `results` (and the README with its findings regenerated), unwritten.
    ValueError when the results have no figures, the README no claims-table markers, or there
    is no claims.csv for it."""
    figures = Path(results) / "figures"
    pngs = sorted(figures.glob("*.png"))
    if not pngs:
        raise ValueError(f"no figures in {figures}: run `make reproduce-figures` first")
    index = figures / "index.md"
    captions = captions_from_index(index.read_text()) if index.exists() else {}
    order = {name: i for i, name in enumerate(captions)}  # index order: experiment by experiment
    pngs.sort(key=lambda p: (order.get(p.stem, len(order)), p.stem))
    lines = ["# Gallery (quick profile, as measured)", "",
             "Regenerate with `make reproduce-figures && make gallery`.", ""]
    for p in pngs:
        lines += [f"### {p.stem}", "", f"![{p.stem}]({p.name})", ""]
        if p.stem in captions:
            lines += [captions[p.stem], ""]
    claims = Path(results) / "claims.md"
    if claims.exists():
        lines += ["## Claims table", "", claims.read_text().strip(), ""]
    text = None if readme is None else readme_with_findings(readme, Path(results) / "claims.csv")
    if text is not None and standard_claims is not None:
        text = _with_findings(text, standard_claims, "standard-claims")
    if text is not None:  # the published GPU runs' sentences, from their committed tables
        from topkscope.reproduce.published_findings import with_published

        text = with_published(text)
    return Gallery({p.name: shrunk_png(p, width) for p in pngs}, "\n".join(lines), text)


def readme_with_findings(readme: Path, claims_csv: Path) -> str:
    """readme's text with its findings table (between the claims-table markers) regenerated
    from claims_csv."""
    return _with_findings(Path(readme).read_text(), claims_csv, "claims")


def _with_findings(text: str, claims_csv: Path, block: str) -> str:
    import pandas as pd

    from topkscope.reproduce.findings import replace_findings

    if not Path(claims_csv).is_file():
        raise ValueError(f"no claims table at {claims_csv}: run `make reproduce-figures` first")
    table = pd.read_csv(claims_csv)
    if block != "claims" and "section" in table.columns:
        table = without_repeated_predictions(table)
    return replace_findings(text, table, block)


def without_repeated_predictions(table):
    """A second profile's claims less its predicted speed-ups: every profile predicts them for
    the same paper models from the same published inputs, so the README shows them once, in
    the quick profile's findings; its time-to-accuracy rows (from its own runs) stay."""
    from topkscope.reproduce.findings import is_time_to_accuracy

    repeated = (table["section"] == "prediction") & ~table["claim"].map(is_time_to_accuracy)
    return table[~repeated]


def update_readme(readme: Path, claims_csv: Path) -> None:
    """Rewrite readme's findings table (between the claims-table markers) from claims_csv."""
    write_bytes_atomic(Path(readme), readme_with_findings(readme, claims_csv).encode())


def losses(gallery: Gallery, out: Path, readme: Path | None) -> list[str]:
    """What publishing `gallery` would drop: figures <out> holds that it lacks, findings
    cells (row x column) the README shows that its new text lacks; one phrase each."""
    from topkscope.reproduce.findings import findings_block, findings_cells

    lost = []
    figures = sorted({p.name for p in Path(out).glob("*.png")} - set(gallery.pngs))
    if figures:
        lost.append(f"{out} would lose {len(figures)} figure(s): {_some(figures)}")
    if readme is not None and gallery.readme is not None:
        old = Path(readme).read_text()
        cells = sorted(cell for block in ("claims", "standard-claims") for cell in
                       findings_cells(findings_block(old, block))
                       - findings_cells(findings_block(gallery.readme, block)))
        if cells:
            rows = sorted({label for _, label, _ in cells})
            lost.append(f"{readme}'s findings would lose {len(cells)} cell(s), in rows "
                        f"{_some(rows)}")
    return lost


def _some(names: list[str]) -> str:
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def publish(results: Path, out: Path, width: int = MAX_WIDTH, readme: Path | None = None,
            allow_shrink: bool = False, log: Callable[[str], None] = print,
            standard_claims: Path | None = None) -> list[Path]:
    """Write the gallery of `results` into `out` (and the README's findings); returns the
    figures written. ValueError, with nothing written, on bad input or when the results hold
    less than what is published (losses) unless allow_shrink."""
    out = Path(out)
    gallery = prepare(results, width, readme, standard_claims)
    lost = losses(gallery, out, readme)
    if lost and not allow_shrink:
        raise ValueError(f"{results} holds less than what is published: {'; '.join(lost)}; run "
                         "the whole profile first (make reproduce-figures), or pass "
                         "--allow-shrink to publish these results anyway")
    for line in lost:
        log(f"gallery: --allow-shrink: {line}")
    written = [write_bytes_atomic(out / name, data) for name, data in gallery.pngs.items()]
    for stale in sorted(set(out.glob("*.png")) - set(written)):
        stale.unlink()
    write_bytes_atomic(out / "README.md", gallery.index.encode())
    if readme is not None and gallery.readme is not None:
        write_bytes_atomic(Path(readme), gallery.readme.encode())
    return written

