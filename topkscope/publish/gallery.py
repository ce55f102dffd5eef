"""`topkscope gallery` (`make gallery`): small copies of the figures for the README.

Reads <results>/figures/*.png and <results>/claims.md, writes <out>/*.png (at most `width`
pixels wide, 256-colour PNG) and <out>/README.md: every figure with its caption from index
entries, then the claims table as measured. Committed under docs/gallery/ so the README shows
real results. The text is regenerated from <results>/claims.csv (or `claims`, a given claims
table): the README's summary and answers between their markers (topkscope.publish.headline),
and, in the README and the findings document (docs/findings.md) alike, the findings tables
between claims-table markers (findings.findings_markdown): no hand-written verdicts or
numbers. A second
claims table (standard_claims: the standard profile's committed claims-standard.csv) fills
the standard-claims blocks the same way and the headline's standard lines. text_only
regenerates the text alone from the claims tables, with no figures (`make findings`).

Partial results never shrink what is published silently: when <results> lacks a figure that
<out> holds, or its claims lack a row of the committed quick claims
(results/reference/claims-<profile>.csv; claims frames compared, never rendered text), publish
refuses with one line naming what would be lost, and writes nothing (allow_shrink=True publishes
them anyway and removes the gallery's figures the results no longer have). Everything is
prepared in memory first, so a refusal or a bad input leaves every file as it was.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from topkscope.io import write_bytes_atomic

MAX_WIDTH = 900
SHOWN = 5  # names listed in a refusal, then "and N more"
# PNGs of the gallery folder that are no figure of the results: the README's screenshot of
# `topkscope report` (tests/_browser.py makes it); never removed or counted as lost
NOT_FIGURES = ("report.png",)


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


@dataclass
class Gallery:
    """Every file publish() would write, prepared in memory: name -> bytes for <out>, the
    gallery README's text, and the README's new text (None without a README)."""

    pngs: dict[str, bytes]
    index: str
    readme: str | None = None
    findings: str | None = None


def prepare(results: Path, width: int = MAX_WIDTH, readme: Path | None = None,
            standard_claims: Path | None = None, findings: Path | None = None,
            claims: Path | None = None, text_only: bool = False,
            progress: bool = False) -> Gallery:
    """The gallery of `results` (and the README's and findings document's text regenerated),
    unwritten. ValueError when the results have no figures (unless text_only), a text file
    none of the blocks it fills, or a claims table is missing."""
    texts = _texts(Path(results) / "claims.csv" if claims is None else Path(claims),
                   standard_claims, {"readme": readme, "findings": findings})
    if text_only:
        return Gallery({}, "", texts.get("readme"), texts.get("findings"))
    figures = Path(results) / "figures"
    pngs = sorted(figures.glob("*.png"))
    if not pngs:
        raise ValueError(f"no figures in {figures}: run `make reproduce-figures` first")
    from topkscope.publish.figures import read_index

    captions = read_index(figures)
    order = {name: i for i, name in enumerate(captions)}  # index order: experiment by experiment
    pngs.sort(key=lambda p: (order.get(p.stem, len(order)), p.stem))
    lines = ["# Gallery (quick profile, as measured)", "",
             "Regenerate with `make reproduce-figures && make gallery`.", ""]
    for p in pngs:
        lines += [f"### {p.stem}", "", f"![{p.stem}]({p.name})", ""]
        if p.stem in captions:
            lines += [captions[p.stem], ""]
    claims_md = Path(results) / "claims.md"
    if claims_md.exists():
        lines += ["## Claims table", "", claims_md.read_text().strip(), ""]
    from topkscope import progress as bars

    shrunk = {p.name: shrunk_png(p, width)
              for p in bars.bar(pngs, desc="gallery: shrink", unit="figure", enabled=progress)}
    return Gallery(shrunk, "\n".join(lines), texts.get("readme"), texts.get("findings"))


def _claims(path: Path):
    """A claims table as written, of any schema version: each renderer brings it to the
    current one (topkscope.claims.migrate) and says when it derived columns."""
    import pandas as pd

    if not Path(path).is_file():
        raise ValueError(f"no claims table at {path}: run `make reproduce-figures` first")
    return pd.read_csv(path)


def _texts(quick_csv: Path, standard_csv: Path | None,
           files: dict[str, Path | None]) -> dict[str, str]:
    """{kind: new text} of each given file ("readme", "findings"): its answer blocks
    (topkscope.publish.headline) and tables (findings.markers) regenerated from the quick
    profile's claims (quick_csv) and, with standard_csv, the standard profile's. ValueError
    naming a file that has none of these blocks, or standard claims that no file has blocks
    for."""
    from topkscope.publish.findings import markers, replace_findings
    from topkscope.publish.headline import (
        HEADLINE_START,
        OUTER_START,
        SUMMARY_START,
        replace_headline,
    )
    from topkscope.publish.published_findings import START as PUBLISHED_START
    from topkscope.publish.published_findings import reference_tables, with_published

    files = {kind: Path(f) for kind, f in files.items() if f is not None}
    if not files:
        return {}
    quick = _claims(quick_csv)
    standard = None if standard_csv is None else _claims(standard_csv)
    profiles = {"Quick": quick, **({} if standard is None else {"Standard": standard})}
    out, standard_used = {}, False
    for kind, path in files.items():
        text = path.read_text()
        filled = False
        if any(start in text for start in (SUMMARY_START, HEADLINE_START, OUTER_START)):
            # links from the README reach docs/, from docs/findings.md their neighbours
            text = replace_headline(text, profiles, gallery=path.parent / _GALLERY[kind],
                                    base=_BASE[kind], reference=reference_tables())
            filled, standard_used = True, standard_used or standard is not None
        for block, table in (("claims", quick), ("standard-claims", standard)):
            if table is not None and markers(block)[0] in text:
                text, filled = replace_findings(text, table, block), True
                standard_used |= block == "standard-claims"
        if PUBLISHED_START in text:  # the published GPU runs' sentences, from their tables
            text, filled = with_published(text), True
        if not filled:
            raise ValueError(f"{path} has no {HEADLINE_START} or {markers('claims')[0]} block "
                             "to fill")
        out[kind] = text
    if standard is not None and not standard_used:
        raise ValueError(f"no file given has a {markers('standard-claims')[0]} block for "
                         f"{standard_csv}")
    return out


# where a file's links to the gallery and to docs/ start, by the file's kind
_GALLERY = {"readme": "docs/gallery", "findings": "gallery"}
_BASE = {"readme": "docs/", "findings": ""}


def update_readme(readme: Path, claims_csv: Path) -> None:
    """Rewrite readme's headline and findings blocks from claims_csv."""
    text = _texts(claims_csv, None, {"readme": readme})["readme"]
    write_bytes_atomic(Path(readme), text.encode())


def losses(gallery: Gallery, out: Path, old_claims: dict | None = None,
           new_claims: dict | None = None) -> list[str]:
    """What publishing `gallery` would drop: figures <out> holds that it lacks (unless it is
    text only), and claims rows a published table holds that the new one lacks
    (old_claims / new_claims: profile -> claims table); one phrase each."""
    from topkscope.publish.findings import lost_rows

    lost = []
    figures = sorted({p.name for p in Path(out).glob("*.png")} - set(gallery.pngs)
                     - set(NOT_FIGURES))
    if figures and gallery.index:
        lost.append(f"{out} would lose {len(figures)} figure(s): {_some(figures)}")
    for profile, old in (old_claims or {}).items():
        new = (new_claims or {}).get(profile)
        if new is None:
            continue
        rows = lost_rows(old, new)
        if rows:
            lost.append(f"the {profile} claims would lose {len(rows)} row(s): {_some(rows)}")
    return lost


def _some(names: list[str]) -> str:
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def publish(results: Path, out: Path, width: int = MAX_WIDTH, readme: Path | None = None,
            allow_shrink: bool = False, log: Callable[[str], None] = print,
            standard_claims: Path | None = None, findings: Path | None = None,
            claims: Path | None = None, text_only: bool = False,
            progress: bool = False) -> list[Path]:
    """Write the gallery of `results` into `out` (and the README's and findings document's
    text; text_only: the text alone); returns the figures written. ValueError, with nothing
    written, on bad input or when the results hold less than what is published (losses)
    unless allow_shrink."""
    out = Path(out)
    gallery = prepare(results, width, readme, standard_claims, findings, claims, text_only,
                      progress)
    given = {"quick": Path(results) / "claims.csv" if claims is None else Path(claims),
             "standard": None if standard_claims is None else Path(standard_claims)}
    old, new = {}, {}
    for profile, path in given.items() if not text_only else ():
        published = Path(results) / "reference" / f"claims-{profile}.csv"
        if path is not None and path.is_file() and published.is_file() \
                and published.resolve() != path.resolve():
            old[profile], new[profile] = _claims(published), _claims(path)
    lost = losses(gallery, out, old, new)
    if lost and not allow_shrink:
        raise ValueError(f"{results if claims is None else claims} holds less than what is "
                         f"published: {'; '.join(lost)}; run the whole profile first (make "
                         "reproduce-figures), or pass --allow-shrink to publish these results "
                         "anyway")
    for line in lost:
        log(f"gallery: --allow-shrink: {line}")
    written = []
    if not text_only:
        written = [write_bytes_atomic(out / name, data) for name, data in gallery.pngs.items()]
        for stale in sorted(set(out.glob("*.png")) - set(written)):
            if stale.name not in NOT_FIGURES:
                stale.unlink()
        write_bytes_atomic(out / "README.md", gallery.index.encode())
    for path, text in ((readme, gallery.readme), (findings, gallery.findings)):
        if path is not None and text is not None:
            write_bytes_atomic(Path(path), text.encode())
    return written
