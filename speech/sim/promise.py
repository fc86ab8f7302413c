"""The promise ``bench tune`` makes: a lower bound on the SLO share of draws of the traffic the tuner
has not seen, from the draws it has (docs/design.md §10.10). Pure: shares in, a bound out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from speech.errors import SimulationInputError
from speech.sim.names import PROMISE_MISS_CHANCE, PROMISE_UNSEEN_DRAWS

SPREAD_TEST_LEVEL = 0.05
"""When the draws' own sd is below this quantile of what n - 1 degrees of freedom give around the
block estimate (:func:`block_share_sd`), the share bound takes the block estimate instead: a one-in-
twenty low spread says the draws missed the rare costly events the blocks saw."""


@dataclass(frozen=True)
class ShareBound:
    """A lower bound on the SLO share of a draw of the traffic the tuner has not seen (a fraction,
    0..1), with its evidence: ``mean`` and ``sd`` (sample, n - 1) of the ``n`` judged draws' shares
    and the Student-t quantile ``t`` it used (None with one draw: nothing to estimate a spread from)."""

    bound: float
    mean: float
    sd: float
    n: int
    t: float | None
    sd_draws: float = 0.0
    """The spread of the draws' shares themselves (sample sd, n - 1)."""
    sd_blocks: float = 0.0
    """The spread a draw's share has if its blocks (speech.sim.fleet.SHARE_BLOCKS) vary as they did
    across the draws (:func:`block_share_sd`); ``sd`` is this one when ``sd_draws`` is implausibly
    small beside it (:data:`SPREAD_TEST_LEVEL`), else ``sd_draws``."""


def block_share_sd(requests: Sequence[Sequence[float]], within: Sequence[Sequence[float]]) -> float:
    """The sd of a draw's share estimated block by block: ``sqrt(sum_b w_b^2 s_b^2)``, where ``s_b``
    is the sample sd (n - 1) of block b's share across the n draws and ``w_b`` its mean share of
    the requests. 0 with fewer than two draws or blocks that do not line up.

    Why: with five draws the sd of their shares rests on 4 degrees of freedom; on a day whose flash
    crowds fall at random hours, five draws can all miss the hours that cost most and show a
    quarter of the true spread (two-peak: 0.04 points from seeds 1..5, 0.15 over 30 draws). Each of
    a day's 24 blocks has its own n draws, so the blocks carry 24 x (n - 1) degrees of freedom:
    a crowd that hurt one block of one training draw counts. It assumes the blocks independent: on
    a superposed trace a burst that one draw has in one block another has in the next (the same
    copies, shifted), so the blocks co-vary negatively and this overstates the spread (azure-code:
    0.110 points against 0.069 over 40 draws; the draws' own 0.083). Hence
    :func:`unseen_share_bound` takes it only when the draws' own sd is implausibly small beside it."""
    r, w = np.asarray(requests, dtype=float), np.asarray(within, dtype=float)
    if r.ndim != 2 or r.shape != w.shape or r.shape[0] < 2 or r.shape[1] == 0:
        return 0.0
    share = np.where(r > 0, w / np.where(r > 0, r, 1.0), 1.0)
    weight = r.mean(axis=0)
    if weight.sum() <= 0:
        return 0.0
    weight = weight / weight.sum()
    return float(math.sqrt(float(np.sum(weight ** 2 * share.var(axis=0, ddof=1)))))


def unseen_share_bound(shares: Sequence[float], miss_chance: float = PROMISE_MISS_CHANCE,
                       unseen_draws: int = PROMISE_UNSEEN_DRAWS,
                       blocks: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]] | None = None) -> ShareBound:
    """The share a further draw is predicted to keep: ``min(lowest, mean - t_{q, n-1} * sd *
    sqrt(1 + 1/n))`` over the ``n`` draws' SLO shares (fractions), with q = 1 - miss_chance /
    unseen_draws. ``sd``: the shares' own sample sd; given ``blocks`` (each draw's requests and
    in-SLO requests per block, speech.sim.fleet.Summary), the sd estimated block by block
    (:func:`block_share_sd`) instead when the shares' is below the :data:`SPREAD_TEST_LEVEL`
    quantile of s / sigma around it (n = 5: under 0.42 of it).

    Why: the lowest of n draws is a poor promise for the next ones. Of n + m exchangeable draws the
    lowest is equally likely to be any of them, so with n = m = 5 "lowest training draw >= target"
    leaves even odds that an unseen draw lands below it. If the draws' shares are independent and
    normal, mean - t_{q, n-1} * sd * sqrt(1 + 1/n) is a one-sided 100q % prediction bound for ONE
    new draw (the sqrt(1 + 1/n) adds the mean's own uncertainty to the new draw's spread); with q =
    1 - miss_chance / unseen_draws, Bonferroni bounds the chance that ANY of ``unseen_draws`` new
    draws falls below it by ``miss_chance``. Shares near 1 are bounded and skewed toward misses
    (bursts), so the normal model is approximate; taking the min with the lowest draw keeps the rule
    never laxer than the old one. A larger ``miss_chance`` is cheaper and promises less: the
    default (:data:`PROMISE_MISS_CHANCE` over :data:`PROMISE_UNSEEN_DRAWS` draws: 10 % over five, q =
    0.98, t = 3.00 with five draws) is the trade-off docs/design.md §10.10 states. One
    draw: no spread to estimate, the bound is that draw's share."""
    if not shares:
        raise SimulationInputError("no draws to bound the share from")
    if not 0.0 < miss_chance < 1.0 or unseen_draws < 1:
        raise SimulationInputError(f"miss chance {miss_chance:g} must be in (0, 1) and unseen draws {unseen_draws} at least 1")
    x = np.asarray(shares, dtype=float)
    n, mean, low = int(x.size), float(x.mean()), float(x.min())
    if n == 1:
        return ShareBound(bound=low, mean=mean, sd=0.0, n=1, t=None)
    # scipy.stats costs about a second to import: here, so `bench tune --help` does not pay it.
    from scipy.stats import chi2
    from scipy.stats import t as student_t

    sd_draws = float(x.std(ddof=1))
    sd_blocks = block_share_sd(*blocks) if blocks is not None else 0.0
    # the draws' own spread, unless it is implausibly small beside the blocks' (below the
    # SPREAD_TEST_LEVEL quantile of s / sigma with n - 1 degrees of freedom): the draws then missed
    # what the blocks saw
    implausible = sd_draws < math.sqrt(float(chi2.ppf(SPREAD_TEST_LEVEL, n - 1)) / (n - 1)) * sd_blocks
    sd = sd_blocks if implausible else sd_draws
    t = float(student_t.ppf(1.0 - miss_chance / unseen_draws, n - 1))
    return ShareBound(bound=min(low, mean - t * sd * math.sqrt(1.0 + 1.0 / n)), mean=mean, sd=sd, n=n, t=t,
                      sd_draws=sd_draws, sd_blocks=sd_blocks)

