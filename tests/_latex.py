"""Checks of the .tex tables we write: their structure everywhere, and pdflatex where it is
installed (texlive-latex-base and -recommended; `.ci/run` installs them when it can)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from topkscope.publish.paper_tables import PACKAGES

MAX_CLAIMS_COLUMNS = 10  # claims.tex: a reader's table, not a dump
_ENV = re.compile(r"\\begin\{(tabular|tabularx|longtable)\}(\{[^{}]*\})?")
_ROW_END = re.compile(r"\\\\(\*|\[[^\]]*\])?\s*$")


def _braced(text: str, i: int) -> int:
    """The index after the brace group that opens at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return j + 1
    raise AssertionError(f"unbalanced braces in {text!r}")


def column_count(spec: str) -> int:
    """Columns of a tabular spec: l, c, r, X and p/m/b{width}; >{..}, <{..}, @{..} skipped."""
    n, i = 0, 0
    while i < len(spec):
        ch = spec[i]
        if ch in "><@!":
            i = _braced(spec, i + 1)
            continue
        if ch in "pmb":
            n += 1
            i = _braced(spec, i + 1)
            continue
        n += ch in "lcrX"
        i += 1
    return n


def _spec(text: str, match: re.Match) -> str:
    """The column spec after \\begin{env} (and tabularx's width)."""
    i = match.end()
    if match.group(1) == "tabularx":
        i = match.start(2) + len(match.group(2)) if match.group(2) else i
        start = text.index("{", i)
    else:
        start = match.start(2) if match.group(2) else text.index("{", i)
    end = _braced(text, start)
    return text[start + 1:end - 1]


def _without_multicolumn_specs(line: str) -> str:
    """The line with the column spec of each \\multicolumn{n}{spec} removed."""
    out, i = "", 0
    for m in re.finditer(r"\\multicolumn\{\d+\}", line):
        if m.start() < i:
            continue
        end = _braced(line, m.end())
        out += line[i:m.end()] + "{}"
        i = end
    return out + line[i:]


def outside_math(line: str) -> str:
    """The line without its $...$ spans (escaped \\$ kept as text)."""
    parts = re.split(r"(?<!\\)\$", line)
    assert len(parts) % 2 == 1, f"unbalanced $ in {line!r}"
    return "".join(parts[::2])


def check_structure(path: Path, max_columns: int | None = None) -> int:
    """Assert a .tex table is well formed; returns its column count: at most max_columns
    columns; every float opened with \\toprule is closed with \\bottomrule; every row has as many cells as columns (\\multicolumn counted); math balanced;
    no raw <, > or | outside math (pdflatex's default encoding prints other glyphs)."""
    text = path.read_text()
    found = list(_ENV.finditer(text))
    assert found, f"{path.name}: no tabular"
    columns = column_count(_spec(text, found[0]))
    assert 1 <= columns <= (max_columns or columns), f"{path.name}: {columns} columns"
    # one float, or several continuing it: each with its rules
    assert text.count(r"\toprule") == text.count(r"\bottomrule") >= 1, path.name
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("%") or stripped.startswith("\\begin{") \
                or stripped.startswith("\\end{"):
            continue
        is_row = bool(_ROW_END.search(stripped))
        if not (is_row or stripped.startswith("\\caption")):
            continue  # layout commands (\\resizebox{\\ifdim\\width>...}) hold no text
        plain = outside_math(_without_multicolumn_specs(stripped))
        for raw in "<>|":
            assert raw not in plain.replace(r"\\", ""), f"{path.name}: raw {raw} in {line!r}"
        if is_row and not stripped.startswith("\\caption"):
            body = _ROW_END.sub("", stripped)
            cells = re.split(r"(?<!\\)&", body)
            spans = sum(int(m) - 1 for m in re.findall(r"\\multicolumn\{(\d+)\}", body))
            assert len(cells) + spans == columns, f"{path.name}: {len(cells) + spans} cells " \
                f"in {line!r}, {columns} columns"
    return columns


def have_pdflatex() -> bool:
    return shutil.which("pdflatex") is not None


def compile_tables(paths: list[Path], work: Path, twocolumn: bool = False) -> str:
    """pdflatex on a minimal article (`twocolumn`: \\documentclass[twocolumn]{article}) that
    inputs every table (each on pages of its own); returns the log. Asserts it compiled
    without errors, missing glyphs, a box overfull or underfull (a line wider than the text, a
    cell stretched past its badness: pdflatex's "Overfull \\hbox", "Underfull \\hbox"), a
    float taller than the page (its rows would be lost), a label defined twice, or a reference
    to a table the article does not hold ("Table ??")."""
    work.mkdir(parents=True, exist_ok=True)
    body = "\n\\clearpage\n".join(rf"\input{{{Path(p).resolve().with_suffix('').as_posix()}}}"
                                  for p in paths)
    (work / "doc.tex").write_text(
        f"\\documentclass{'[twocolumn]' if twocolumn else ''}{{article}}\n"
        f"\\usepackage{{{','.join(PACKAGES)}}}\n"
        "\\tracinglostchars=1\n\\begin{document}\n" + body + "\n\\end{document}\n")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                          cwd=work, capture_output=True, text=True, timeout=300)
    log = (work / "doc.log").read_text(errors="replace")
    assert done.returncode == 0, log[-3000:]
    assert "Missing character" not in log, [ln for ln in log.splitlines() if "Missing" in ln]
    boxes = [ln for ln in log.splitlines() if ln.startswith(("Overfull \\hbox", "Overfull \\vbox",
                                                             "Underfull \\hbox"))]
    assert not boxes, boxes[:5]
    assert "Float too large" not in log, [ln for ln in log.splitlines() if "Float too" in ln]
    # a label defined twice: LaTeX says so on the next run; the .aux of this one lists each
    labels = re.findall(r"\\newlabel\{([^}]*)\}", (work / "doc.aux").read_text(errors="replace"))
    twice = sorted({x for x in labels if labels.count(x) > 1})
    assert not twice, f"labels multiply defined: {twice[:5]}"
    unresolved = [ln for ln in log.splitlines()
                  if "Reference `" in ln or "undefined references" in ln]
    assert not unresolved, unresolved[:5]
    return log


def pages(log: str) -> int:
    """The pages of a document, from its pdflatex log."""
    import re

    found = re.search(r"Output written on \S+ \((\d+) pages?", log)
    assert found, log[-500:]
    return int(found.group(1))
