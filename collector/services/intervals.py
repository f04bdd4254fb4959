"""95% confidence intervals of a mean (experiment summaries and comparisons).

The interval of the mean of ``n`` values is ``mean ± t · s / √n``: ``s`` the sample standard
deviation, ``t`` the 97.5% quantile of Student's t with ``n - 1`` degrees of freedom. The
quantiles are tabled (scipy is not a dependency): exact to three decimals for 1 to 30 degrees
of freedom, then interpolated linearly in ``1/df`` between 30, 40, 60, 120 and infinity (the
normal 1.96), which is within 0.001 of the exact quantile. A comparison's interval is the same
computation over the paired deltas (candidate minus base, item by item), so it is the interval
of the mean paired difference, not of the difference of two means.

With one value there is no spread to estimate: the interval is the value itself (``count``
says how much it rests on). With no value there is no mean (None).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

# t(0.975, df) for df = 1..30.
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# Beyond 30: (df, t) points, interpolated in 1/df; df = infinity is the normal quantile.
_T_975_TAIL = ((30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980))
_Z_975 = 1.959964


def t_975(df: int) -> float:
    """Return the 97.5% quantile of Student's t with ``df`` degrees of freedom (df >= 1).

    >>> t_975(1), t_975(30), round(t_975(50), 3), round(t_975(10**9), 3)
    (12.706, 2.042, 2.009, 1.96)
    """
    if df < 1:
        raise ValueError("df must be at least 1")
    if df <= len(_T_975):
        return _T_975[df - 1]
    points = (*_T_975_TAIL, (math.inf, _Z_975))
    for (lo_df, lo_t), (hi_df, hi_t) in itertools.pairwise(points):
        if df <= hi_df:
            x, x0, x1 = 1 / df, 1 / lo_df, 0.0 if math.isinf(hi_df) else 1 / hi_df
            return lo_t + (hi_t - lo_t) * (x0 - x) / (x0 - x1)
    return _Z_975  # pragma: no cover (the last point is infinity)


@dataclass(frozen=True)
class MeanInterval:
    """A mean and its 95% confidence interval over ``count`` values."""

    mean: float
    ci_low: float
    ci_high: float
    count: int


def mean_interval(values: Sequence[float]) -> MeanInterval | None:
    """Return the mean of ``values`` and its t-based 95% interval (None when empty).

    >>> round(mean_interval([1.0, 0.0, 1.0, 1.0]).ci_high, 4)
    1.5455
    >>> mean_interval([2.0])
    MeanInterval(mean=2.0, ci_low=2.0, ci_high=2.0, count=1)
    """
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    if n == 1:
        return MeanInterval(mean, mean, mean, 1)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_975(n - 1) * math.sqrt(variance / n)
    return MeanInterval(mean, mean - half, mean + half, n)


def interval_of(mean: float, sd: float, count: int) -> MeanInterval:
    """The interval of a mean of ``count`` values whose sample standard deviation is ``sd``
    (as ClickHouse's ``avg`` and ``stddevSamp`` give them; ``sd`` unused for one value)."""
    if count <= 1 or not math.isfinite(sd):
        return MeanInterval(mean, mean, mean, count)
    half = t_975(count - 1) * sd / math.sqrt(count)
    return MeanInterval(mean, mean - half, mean + half, count)


def within(interval: MeanInterval, low: float, high: float) -> MeanInterval:
    """The interval cut to ``[low, high]``, the values its mean can take (a mean of scores
    on a 0-1 scale cannot leave it, nor a delta of two such means leave [-1, 1]). The true
    mean is in that range, so it is in the cut interval whenever it is in the whole one:
    the 95% coverage stands. A t interval over a few items otherwise runs past the scale."""
    return MeanInterval(
        interval.mean, max(interval.ci_low, low), min(interval.ci_high, high), interval.count
    )
