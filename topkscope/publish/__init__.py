"""The renderers: what the claims table and the runs say, in the forms a reader meets them —
the README's first screen (headline: one answer per paper question), docs/findings.md's tables
and sentences (findings), the gallery (gallery), the LaTeX and CSV tables for papers
(paper_tables), the one-page HTML report (report), the published runs' sentences
(published_findings) and the figures of a run or an experiment with their captions (figures).
They format the rows' fields and decide no verdict (topkscope.claims decides them).
"""
