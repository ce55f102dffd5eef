"""The driver behind `topkscope figures` / `make reproduce-figures` (see driver.py)."""
