"""Oort's guided participant selection [Lai, Zhu, Madhyastha, Chowdhury, "Oort: Efficient Federated
Learning via Guided Participant Selection", OSDI 2021].

The algorithm and its defaults follow the paper (Algorithm 1) and FedScale's
implementation (``thirdparty/oort/oort.py``, ``fedscale/cloud/client_manager.py``,
``fedscale/cloud/aggregation/aggregator.py``, read for the facts; no code is
shared). Where it follows one against the other, and where it deliberately
differs from both, is listed in :class:`Oort`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from pydantic import Field

from hpcbench.fl.contracts import STATUS_COMPLETED, STATUS_DROPPED, RoundFeedback, Selector, StrategyConfig

__all__ = ["Oort", "oort_scores", "exploit_candidates", "pacer_step"]


def oort_scores(reward: np.ndarray, duration_s: np.ndarray, last_round: np.ndarray, round_: int,
                preferred_s: float, clip_bound: float, penalty: float) -> np.ndarray:
    """Oort's exploitation score of explored clients (Lai et al. 2021, Algorithm 1, lines 5-9).

    ``score_i = (min(U_i, c) - lo) / max(c - lo, 1e-4) + sqrt(0.1 ln(R) / L_i)``,
    times ``(T / t_i)^alpha`` when ``t_i > T``, with ``U_i`` the statistical
    utility, ``c`` its ``clip_bound`` quantile over the candidates (sorted
    values, index ``int(n * clip_bound)``), ``lo`` 0.999 times its minimum,
    ``R`` the round, ``L_i`` the last round the client took part in,
    ``t_i`` its last duration and ``T`` the preferred round duration.

    FedScale takes ``c`` and ``lo`` over every online, non-blacklisted client
    with a positive reward, unexplored ones included, and divides by
    ``max(U) - lo`` (the unclipped maximum). Here both come from the clients
    being scored and the span ends at the clip value, on purpose: an
    unexplored client's reward is its sample count, not a measured
    loss-weighted utility, so mixing it in makes the explored scores depend on
    which unexplored clients happen to be online; and with the unclipped
    maximum one outlier (the client clipping is there to tame) still squeezes
    every other normalised utility towards 0, leaving the staleness bonus to
    decide.

    Parameters
    ----------
    reward, duration_s : ndarray of shape (n,), float64
    last_round : ndarray of shape (n,), int (every entry >= 1)
    round_ : int
    preferred_s : float
        ``T`` (``inf``: no system penalty).
    clip_bound : float
        Quantile in (0, 1].
    penalty : float
        ``alpha``.

    Returns
    -------
    ndarray of shape (n,), float64
    """
    if len(reward) == 0:
        return np.zeros(0)
    ordered = np.sort(reward)
    clip = float(ordered[min(int(len(ordered) * clip_bound), len(ordered) - 1)])
    lo = float(ordered[0]) * 0.999
    span = max(clip - lo, 1e-4)
    score = (np.minimum(reward, clip) - lo) / span + np.sqrt(0.1 * math.log(round_) / last_round)
    slow = duration_s > preferred_s
    score[slow] *= (preferred_s / np.maximum(duration_s[slow], 1e-4)) ** penalty
    return np.abs(score)


def exploit_candidates(score: np.ndarray, ids: np.ndarray, k: int, cut_off_util: float,
                       candidate_factor: float) -> np.ndarray:
    """Positions in ``score`` of the exploitation candidates, best first (FedScale's cut-off).

    Clients are ranked by descending score (ties: ascending id). The cut-off
    is ``cut_off_util`` times the score at position ``k`` (0-based, so the
    ``k + 1``-th best; the last one when there are only ``k``). Every client
    scoring at least the cut-off is a candidate, and the ranking is followed
    further until there are more than ``candidate_factor * k`` candidates,
    i.e. ``max(#{score >= cut}, floor(candidate_factor * k) + 1)`` of them
    (FedScale stops only once it holds more than ``10 k``), at most all.

    Parameters
    ----------
    score : ndarray of shape (n,), float64
    ids : ndarray of shape (n,), int64
        Client ids, for the tie order.
    k : int
        Exploitation slots (>= 1).
    cut_off_util, candidate_factor : float

    Returns
    -------
    ndarray of int64, positions into ``score``
    """
    order = np.lexsort((ids, -score))
    if len(order) == 0:
        return order
    cut = score[order[min(k, len(order) - 1)]] * cut_off_util
    keep = max(int(np.count_nonzero(score >= cut)), math.floor(candidate_factor * k) + 1)
    return order[:keep]


def pacer_step(history: list[float], round_: int, step: int, delta: float, threshold: float) -> float:
    """Oort's pacer: the new ``round_threshold`` (percent) after round ``round_``'s utility is recorded.

    Every ``step`` rounds (from round ``2 step``) the summed exploitation
    utility of the last ``step`` rounds is compared with the ``step`` before:
    if it changed by at most 10 % the threshold is relaxed by ``delta`` (at
    most 100: admit slower clients for more utility); if it changed by at
    least 5 times, it is tightened by ``delta`` (at least ``delta``). This is
    FedScale's rule; the paper's Algorithm 1 only relaxes, when the last
    window's sum is below the one before.

    Parameters
    ----------
    history : list of float
        One entry per round so far, oldest first: the mean utility
        ``sum U_i / (m + 1e-4)`` of the ``m`` clients exploited in the
        previous round that completed it (0 when none).
    round_, step : int
        The round now being selected (from 1) and ``pacer_step``.
    delta, threshold : float
        ``pacer_delta`` and the current ``round_threshold``, percent.

    Returns
    -------
    float
        The new ``round_threshold``.
    """
    if round_ < 2 * step or round_ % step:
        return threshold
    last = sum(history[-2 * step:-step])
    current = sum(history[-step:])
    if abs(current - last) <= 0.1 * last:
        return min(100.0, threshold + delta)
    if abs(current - last) >= 5 * last:
        return max(delta, threshold - delta)
    return threshold


class Oort(Selector):
    """Oort: exploit clients of high statistical utility that finish fast, explore the rest.

    Each round (Lai et al. 2021, Algorithm 1): the pacer (:func:`pacer_step`)
    may move ``round_threshold``; the preferred duration ``T`` is the
    ``round_threshold`` percentile of every registered client's last (or
    expected) duration; the exploration factor ``e`` decays (``e <- max(e *
    exploration_decay, exploration_min)``); ``int(count * e)`` slots go to
    unexplored online clients and the rest, ``k``, to explored ones. Explored
    clients are scored by :func:`oort_scores`, the candidates are chosen by
    :func:`exploit_candidates`, and ``k`` of them are drawn without
    replacement with probability proportional to score. Unexplored clients
    are ranked by their initial reward ``min(n_i, local_steps * batch_size)``
    times ``(T / t_i)^alpha`` when their expected duration ``t_i`` exceeds
    ``T``, the best ``sample_window`` times the slots are kept, and the slots
    are drawn proportional to that reward (as FedScale; the paper says
    "sample by speed"). With ``blacklist_rounds >= 0``, clients fed back more
    than that many times are excluded, most often first and at most
    ``int(blacklist_max_len * num_clients)`` of them.

    Feedback (:meth:`feedback`) sets the utility, duration and last round of
    each client that completed or straggled (stragglers: the round's mean
    utility of completed clients, as FedScale); dropped clients get none.

    Where FedScale's code and the paper part, this follows FedScale for the
    pacer (the paper relaxes ``T`` when the last window's utility fell;
    FedScale relaxes it when the change is at most 10 % and tightens it when
    it is 5x or more) and for the exploration order (initial reward, not
    speed), and the paper for the statistical utility: over every sample of
    local training (:func:`hpcbench.fl.engines.training.train_client`), where
    FedScale's client squares only its last minibatch's losses.

    Deliberate differences from FedScale's code, and why:

    - normalisation of utilities: see :func:`oort_scores`;
    - round 1 goes through Oort (every slot explores, no client being
      explored yet); FedScale's client manager draws round 1 uniformly at
      random because its selector cannot take a cut-off score from an empty
      explored set, so FedScale's Oort round ``R`` is its aggregator's round
      ``R + 1``. The staleness bonus ``sqrt(0.1 ln R / L_i)`` uses one round
      count here, the paper's, for ``R`` and ``L_i``;
    - stragglers' last round is the round they were selected in (FedScale's
      aggregator stamps them with the next round, only because it registers
      them after advancing its counter); when no client completed they keep
      their previous utility (FedScale credits them with 0);
    - once fewer unexplored clients are online than exploration slots, the
      remaining slots go to exploitation (FedScale leaves them empty and the
      round selects fewer clients than asked; Oort's own repository fills
      them at random);
    - when no more clients are online than asked for, Oort still runs and
      selects them all, so its round count, exploration decay and pacer
      advance every round (FedScale then returns the online clients without
      calling the selector);
    - the pacer's per-round utility counts the exploited clients that
      completed: a straggler's utility is the round's mean, imputed, not
      measured (FedScale counts stragglers too);
    - ties in score or reward are broken by ascending client id, and the
      draws use a generator seeded by ``(seed, round)``, so the selection is
      reproducible, resumable from a checkpoint, and the same at every world
      size; the blacklist cap is rounded down to a whole number of clients
      (FedScale slices with the float product, an error in Python 3 when the
      cap binds).

    Parameters
    ----------
    config : Oort.Config
    seed : int
    num_examples : ndarray of shape (num_clients,), int64
    expected_duration_s : ndarray of shape (num_clients,), float64
    work_per_round : int
    """

    class Config(StrategyConfig):
        """Oort's keys (FedScale's defaults)."""

        exploration_factor: float = Field(0.9, ge=0, le=1, description="initial fraction of slots explored")
        exploration_decay: float = Field(0.98, gt=0, le=1, description="exploration factor x this per round")
        exploration_min: float = Field(0.3, ge=0, le=1, description="floor of the exploration factor")
        round_threshold: float = Field(30.0, gt=0, le=100,
                                       description="percentile of durations taken as the preferred duration T")
        round_penalty: float = Field(2.0, ge=0, le=100, allow_inf_nan=False,
                                     description="alpha of the system penalty (T / t_i)^alpha")
        clip_bound: float = Field(0.9, gt=0, le=1, description="utility quantile utilities are clipped at")
        cut_off_util: float = Field(0.05, ge=0, le=1,
                                    description="candidates score at least this x the cut-off score")
        candidate_factor: float = Field(
            10.0, ge=1, le=1e6, allow_inf_nan=False,
            description="candidates are more than this x the exploitation slots (FedScale: 10)")
        sample_window: float = Field(5.0, ge=1, le=1e6, allow_inf_nan=False,
                                     description="explore among the best sample_window x slots unexplored")
        pacer_step: int = Field(20, ge=1, le=1_000_000, description="rounds per pacer window")
        pacer_delta: float = Field(5.0, gt=0, le=100, description="round_threshold change per pacer step")
        blacklist_rounds: int = Field(-1, ge=-1, description="exclude clients fed back more often (-1: off)")
        blacklist_max_len: float = Field(0.3, ge=0, le=1, description="most clients the blacklist may hold")

    def __init__(self, config: "Oort.Config", seed: int, num_examples: np.ndarray,
                 expected_duration_s: np.ndarray, work_per_round: int) -> None:
        super().__init__(config, seed, num_examples, expected_duration_s, work_per_round)
        n = len(num_examples)
        self.reward = np.minimum(np.asarray(num_examples, dtype=np.float64), float(work_per_round))
        self.duration_s = np.asarray(expected_duration_s, dtype=np.float64).copy()
        if self.duration_s.shape != (n,):
            raise ValueError(f"expected_duration_s must have shape ({n},), got {self.duration_s.shape}")
        self.last_round = np.zeros(n, dtype=np.int64)
        self.times_selected = np.zeros(n, dtype=np.int64)
        self.exploration = float(config.exploration_factor)
        self.round_threshold = float(config.round_threshold)
        self.exploit_history: list[float] = []
        self.exploited = np.zeros(0, dtype=np.int64)
        self._completed_since_pacer = np.zeros(n, dtype=bool)

    # -- selection -------------------------------------------------------------------------------
    def preferred_duration_s(self) -> float:
        """``T``: the ``round_threshold`` percentile of every client's duration (inf at 100)."""
        if self.round_threshold >= 100:
            return math.inf
        ordered = np.sort(self.duration_s)
        return float(ordered[min(int(len(ordered) * self.round_threshold / 100.0), len(ordered) - 1)])

    def _blacklist(self) -> np.ndarray:
        c = self.config
        n = len(self.reward)
        if c.blacklist_rounds < 0:
            return np.zeros(n, dtype=bool)
        order = np.lexsort((np.arange(n), -self.times_selected))
        over = order[self.times_selected[order] > c.blacklist_rounds][:int(c.blacklist_max_len * n)]
        mask = np.zeros(n, dtype=bool)
        mask[over] = True
        return mask

    def _pace(self, round_: int) -> None:
        done = self.exploited[self._completed_since_pacer[self.exploited]]
        self.exploit_history.append(float(self.reward[done].sum() / (len(done) + 1e-4)))
        self._completed_since_pacer[:] = False
        c = self.config
        self.round_threshold = pacer_step(self.exploit_history, round_, c.pacer_step, c.pacer_delta,
                                          self.round_threshold)

    @staticmethod
    def _draw(rng: np.random.Generator, ids: np.ndarray, weight: np.ndarray, k: int) -> np.ndarray:
        """``k`` of ``ids`` without replacement, with probability proportional to ``weight``."""
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        if k >= len(ids):
            return ids.copy()
        w = np.maximum(weight, 0.0) + 1e-12  # every candidate keeps a chance: never fewer nonzero than k
        return rng.choice(ids, size=k, replace=False, p=w / w.sum())

    def select(self, round_: int, online: np.ndarray, count: int) -> np.ndarray:
        """``count`` online clients (fewer only if fewer are online), int64 ascending."""
        c = self.config
        self._pace(round_)
        feasible = np.asarray(online, dtype=np.int64)
        feasible = feasible[~self._blacklist()[feasible]]
        preferred = self.preferred_duration_s()
        explored = feasible[self.times_selected[feasible] > 0]
        unexplored = feasible[self.times_selected[feasible] == 0]
        self.exploration = max(self.exploration * c.exploration_decay, c.exploration_min)
        explore_slots = min(int(count * self.exploration), len(unexplored))
        exploit_len = min(count - explore_slots, len(explored))
        rng = np.random.default_rng([self.seed, round_, 0x0027])
        exploit = np.zeros(0, dtype=np.int64)
        if exploit_len > 0:
            score = oort_scores(self.reward[explored], self.duration_s[explored], self.last_round[explored],
                                round_, preferred, c.clip_bound, c.round_penalty)
            cand = exploit_candidates(score, explored, exploit_len, c.cut_off_util, c.candidate_factor)
            exploit = self._draw(rng, explored[cand], score[cand], exploit_len)
        explore_len = min(len(unexplored), count - len(exploit))
        explore = np.zeros(0, dtype=np.int64)
        if explore_len > 0:
            init = self.reward[unexplored].copy()
            slow = self.duration_s[unexplored] > preferred
            init[slow] *= (preferred / np.maximum(self.duration_s[unexplored][slow], 1e-4)) ** c.round_penalty
            order = np.lexsort((unexplored, -init))[:min(int(c.sample_window * explore_len), len(unexplored))]
            explore = self._draw(rng, unexplored[order], init[order], explore_len)
        self.exploited = np.sort(exploit)
        return np.sort(np.concatenate([exploit, explore]).astype(np.int64))

    # -- feedback --------------------------------------------------------------------------------
    def feedback(self, round_: int, feedback: RoundFeedback) -> None:
        """Record the utility, duration and round of each client that finished.

        Completed clients give their measured utility; stragglers the mean
        utility of the round's completed clients (their own record when none
        completed). Dropped clients (offline before finishing) are ignored, as
        FedScale registers no feedback for them: an unexplored one stays
        unexplored, an explored one keeps its previous record.
        """
        status = np.asarray(feedback.status)
        back = status != STATUS_DROPPED
        ids = np.asarray(feedback.client_ids, dtype=np.int64)[back]
        done = status[back] == STATUS_COMPLETED
        utility = np.asarray(feedback.utility, dtype=np.float64)[back]
        if done.any():
            utility[~done] = float(utility[done].mean())
        else:
            utility[~done] = self.reward[ids[~done]]
        self.reward[ids] = utility
        self.duration_s[ids] = np.asarray(feedback.duration_s, dtype=np.float64)[back]
        self.last_round[ids] = round_
        self.times_selected[ids] += 1
        self._completed_since_pacer[ids[done]] = True

    # -- state -----------------------------------------------------------------------------------
    _ARRAYS = ("reward", "duration_s", "last_round", "times_selected", "exploited", "_completed_since_pacer")

    def state_dict(self) -> dict[str, Any]:
        """Per-client arrays, exploration factor, round threshold and the pacer's history (copies)."""
        state = {name: getattr(self, name).copy() for name in self._ARRAYS}
        state.update(exploration=self.exploration, round_threshold=self.round_threshold,
                     exploit_history=list(self.exploit_history))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output.

        Raises
        ------
        ValueError
            Missing or extra keys, or arrays of the wrong length.
        """
        want = set(self._ARRAYS) | {"exploration", "round_threshold", "exploit_history"}
        if set(state) != want:
            raise ValueError(f"Oort state needs keys {sorted(want)}; got {sorted(state)}")
        for name in self._ARRAYS:
            old = getattr(self, name)
            new = np.array(state[name], dtype=old.dtype)
            if name != "exploited" and new.shape != old.shape:
                raise ValueError(f"Oort state {name!r} has shape {new.shape}, expected {old.shape}")
            setattr(self, name, new)
        self.exploration = float(state["exploration"])
        self.round_threshold = float(state["round_threshold"])
        self.exploit_history = [float(x) for x in state["exploit_history"]]
