"""The forecast's names and defaults that command-line help states, in a module that imports nothing:
``bench forecast --help`` reads them without loading numpy or statsmodels. :mod:`speech.plan.forecast`
owns them and imports them from here."""

MODELS = ("auto", "mstl", "ets", "seasonal-naive")
"""The forecast models ``bench forecast --model`` chooses from (auto: the backtest's best)."""
DEFAULT_QUANTILE = 0.9
"""The upper quantile the floors are sized for, by default."""
