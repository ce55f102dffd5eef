"""results/figures/index.md: every figure with its caption, grouped by experiment, plus the claims."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from topkscope.io import write_bytes_atomic


@dataclasses.dataclass(frozen=True)
class FigureEntry:
    """One drawn figure: file stem, the experiment it comes from, its caption and files."""

    name: str
    experiment: str
    caption: str
    files: tuple[Path, ...]

    @property
    def png(self) -> Path | None:
        return next((f for f in self.files if f.suffix == ".png"), None)


def render_index(
    entries: Sequence[FigureEntry], out_dir: Path, *, profile: str, claims_markdown: str = "",
    notes: Sequence[str] = (),
) -> str:
    """Markdown: per experiment, each figure (PNG inline, PDF linked) with its caption."""
    lines = [f"# topkscope figures — `{profile}` profile", ""]
    lines += [f"- {n}" for n in notes]
    if notes:
        lines.append("")
    by_exp: dict[str, list[FigureEntry]] = {}
    for e in entries:
        by_exp.setdefault(e.experiment, []).append(e)
    lines.append("Contents: " + ", ".join(f"[{x}](#{_anchor(x)})" for x in by_exp)
                 + (", [claims](#claims)" if claims_markdown else ""))
    lines.append("")
    for exp, group in by_exp.items():
        lines += [f"## {exp}", ""]
        for e in group:
            png = e.png
            links = " · ".join(f"[{f.suffix[1:]}]({_rel(f, out_dir)})" for f in e.files)
            lines.append(f"### {e.name}")
            lines.append("")
            if png is not None:
                lines.append(f"![{e.name}]({_rel(png, out_dir)})")
                lines.append("")
            lines.append(f"{e.caption} ({links})")
            lines.append("")
    if claims_markdown:
        lines += ["## claims", "", claims_markdown.strip(), ""]
    return "\n".join(lines)


def write_index(entries: Sequence[FigureEntry], out_dir: str | Path, **kwargs) -> Path:
    out_dir = Path(out_dir)
    text = render_index(entries, out_dir, **kwargs)
    return write_bytes_atomic(out_dir / "index.md", text.encode())


def _rel(path: Path, base: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")
