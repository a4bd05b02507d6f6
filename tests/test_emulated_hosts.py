"""The emulated-hosts launcher's pieces without launching: ssh's argument forms, Hydra's ``-hosts``, the
two-level cost model and ``auto`` across hosts."""

from __future__ import annotations

import json
import os

import pytest

from hpcbench.collectives import choose_algorithm
from hpcbench.collectives.algorithms._shapes import tree_bcast_cost, tree_reduce_cost
from hpcbench.collectives.algorithms.hierarchical import hierarchical_levels_cost
from hpcbench.collectives.cost import link_beta, predict_allreduce
from hpcbench.collectives.linkcost import HostLinks, fastest_allreduce_hosts, predict_allreduce_hosts
from hpcbench.runtime import launch
from hpcbench.runtime.emulated_hosts import hosts_argument, launcher_path, mpiexec_arguments
from hpcbench.runtime.emulated_ssh import split_ssh_arguments
from mpitools import ROOT


@pytest.mark.parametrize("argv, host, command", [
    (["-x", "node0", '"/v/bin/hydra_pmi_proxy"', "--control-port", "vm:4"],
     "node0", '"/v/bin/hydra_pmi_proxy" --control-port vm:4'),
    (["-o", "StrictHostKeyChecking=no", "-p", "22", "user@node1", "echo", "hi"], "node1", "echo hi"),
    (["-oBatchMode=yes", "-xq", "node2", "true"], "node2", "true"),
    (["--", "node3", "a b"], "node3", "a b"),
])
def test_ssh_arguments_give_host_and_command(argv, host, command):
    assert split_ssh_arguments(argv) == (host, command)


@pytest.mark.parametrize("argv, needle", [([], "no host"), (["-x", "node0"], "no command"), (["-o"], "-o needs")])
def test_bad_ssh_arguments_are_refused(argv, needle):
    with pytest.raises(ValueError, match=needle):
        split_ssh_arguments(argv)


def test_launcher_is_executable_and_hosts_are_placed_in_order():
    assert os.access(launcher_path(), os.X_OK)
    assert hosts_argument([3, 1]) == "node0:3,node1:1"
    assert mpiexec_arguments([2, 2], ["a", "b"])[-1] == "a:2,b:2"
    cmd = launch.mpi_command(4, ["-c", "pass"], python="py", hosts=(2, 2))
    assert cmd[1:5] == ["-launcher", "ssh", "-launcher-exec", launcher_path()]
    assert cmd[5:9] == ["-hosts", "node0:2,node1:2", "-n", "4"]
    for bad in ([2, 1], [0, 4]):
        with pytest.raises(ValueError, match="hosts"):
            launch.mpi_command(4, ["x"], hosts=bad)


def test_two_level_model_prices_each_phase_on_its_link():
    inter = link_beta(1e9)
    links = HostLinks((2, 2), 0.0, 0.0, 0.0, inter)
    m = 10 ** 6
    # the 2 shard owners of a host cross at once through its one card: 2 x (m/2 per owner)
    assert predict_allreduce_hosts("hierarchical", m, links) == pytest.approx(2 * 0.5 * 2 * (m / 2) * inter)
    # the ring waits for a message across hosts at every step: the registered model at the slow link
    assert predict_allreduce_hosts("ring", m, links) == pytest.approx(predict_allreduce("ring", m, 4, 0.0, inter))
    # every link alike: the registered single-level models with hosts of local_size ranks, where one rank
    # per host crosses; hierarchical's second owner per host adds one owner's inter-host bytes (2 x 1/2 x m/2)
    same = HostLinks((2, 2), 1e-5, 1e-9, 1e-5, 1e-9)
    assert predict_allreduce_hosts("binary_tree_star", m, same) == pytest.approx(
        predict_allreduce("binary_tree_star", m, 4, 1e-5, 1e-9, local_size=2))
    assert predict_allreduce_hosts("hierarchical", m, same) == pytest.approx(
        predict_allreduce("hierarchical", m, 4, 1e-5, 1e-9, local_size=2) + 2 * 0.5 * (m / 2) * 1e-9)
    best, times = fastest_allreduce_hosts(["ring", "binary_tree_star", "hierarchical"], [m], links)
    assert best == "hierarchical" and times["hierarchical"] < times["ring"]
    # one host: the inter-host link is never used
    assert predict_allreduce_hosts("hierarchical", m, HostLinks((4,), 0.0, 1e-9, 0.0, 1.0)) < 1e-2
    assert list(links.betas()) == [inter] * 4


def test_hierarchical_uneven_hosts_use_the_smallest_hosts_shards():
    links = HostLinks((3, 1), 0.0, 0.0, 0.0, 1e-9)
    assert predict_allreduce_hosts("hierarchical", 1000, links) == pytest.approx(2 * 0.5 * 1000 * 1e-9)


@pytest.mark.parametrize("layout, senders", [((2, 2), 2), ((3, 1), 1), ((1, 1, 1, 1), 1), ((4, 4), 4)])
def test_shared_card_multiplies_the_concurrent_inter_host_phase(layout, senders):
    """hierarchical's inter-host phase with a host's card shared by its S = min(layout) shard owners: S x the
    bytes one owner sends across, 2 (a_e + S (G-1)/G m/S b_e); 2x2: 2 owners per host, 3+1 and 4x1: one."""
    m, a_e, b_e = 8 * 10 ** 6, 3e-5, 8e-8
    links = HostLinks(layout, 0.0, 0.0, a_e, b_e)
    hosts, shard = len(layout), m / min(layout)
    one = 2 * (a_e + (hosts - 1) / hosts * shard * b_e)                 # one owner alone on the card
    both = 2 * (a_e + senders * (hosts - 1) / hosts * shard * b_e)
    assert predict_allreduce_hosts("hierarchical", m, links) == pytest.approx(both)
    assert hierarchical_levels_cost(m, layout, 0.0, 0.0, a_e, b_e, shared_card=False) == pytest.approx(one)
    # the card carries 2 (G-1)/G m whatever the layout
    assert predict_allreduce_hosts("hierarchical", m, HostLinks(layout, 0, 0, 0, b_e)) == pytest.approx(
        2 * (hosts - 1) / hosts * m * b_e)


@pytest.mark.parametrize("layout", [(2, 2), (3, 1), (1, 1, 1, 1)])
def test_other_algorithms_on_a_shared_card(layout):
    """ring: one crossing per host per step, priced at the inter link as it is; binary_tree_star: one leader per
    host crosses; star and tree (several ranks of a host may cross at once): L x the inter seconds per byte, an
    upper bound; recursive doubling and Rabenseifner from their schedules (below), below that bound."""
    m, b_e = 10 ** 6, 8e-9
    links = HostLinks(layout, 0.0, 0.0, 0.0, b_e)
    p, most = sum(layout), max(layout)
    assert predict_allreduce_hosts("ring", m, links) == pytest.approx(predict_allreduce("ring", m, p, 0.0, b_e))
    tree = tree_reduce_cost(m, len(layout), 0.0, b_e) + tree_bcast_cost(m, len(layout), 0.0, b_e)  # over the leaders
    assert predict_allreduce_hosts("binary_tree_star", m, links) == pytest.approx(tree)
    for alg in ("star", "tree"):
        assert predict_allreduce_hosts(alg, m, links) == pytest.approx(
            predict_allreduce(alg, m, p, 0.0, most * b_e)), alg
    for alg in ("recursive_doubling", "rabenseifner"):
        assert predict_allreduce_hosts(alg, m, links) <= predict_allreduce(alg, m, p, 0.0, most * b_e) * (1 + 1e-12)


@pytest.mark.parametrize("layout", [(2, 2), (4, 4), (2, 2, 2, 2), (1, 1, 1, 1)])
def test_recursive_doubling_and_rabenseifner_priced_step_by_step(layout):
    """Power-of-two worlds, hosts of L ranks (contiguous, L a power of two): recursive doubling's first log2 L
    exchanges stay inside the hosts (a_i + m b_i each), the other log2 G cross with all L ranks of a host on its
    card (a_e + L m b_e); Rabenseifner halves from distance p/2 down, so its first log2 G halving steps cross
    (m/2, m/4, ...: a_e + L m/2^k b_e), its last log2 L stay inside, and the doubling steps mirror them."""
    m, a_i, b_i, a_e, b_e = 2 ** 22, 1e-6, 1e-10, 5e-5, 8e-9
    links = HostLinks(layout, a_i, b_i, a_e, b_e)
    L, G = layout[0], len(layout)
    lg_l, lg_g = L.bit_length() - 1, G.bit_length() - 1
    rd = lg_l * (a_i + m * b_i) + lg_g * (a_e + L * m * b_e)
    assert predict_allreduce_hosts("recursive_doubling", m, links) == pytest.approx(rd)
    halves = [m / 2 ** k for k in range(1, lg_g + lg_l + 1)]            # bytes a rank sends at each halving step
    rab = 2 * (sum(a_e + L * h * b_e for h in halves[:lg_g]) + sum(a_i + h * b_i for h in halves[lg_g:]))
    assert predict_allreduce_hosts("rabenseifner", m, links) == pytest.approx(rab)
    # a reduction of gamma per byte adds each step's reduced bytes: the whole vector per recursive-doubling step
    gamma = 1e-10
    assert predict_allreduce_hosts("recursive_doubling", m, links, gamma) == pytest.approx(
        rd + (lg_l + lg_g) * m * gamma)
    # three ranks: no schedule (the fold), the upper bound as before
    odd = HostLinks((2, 1), 0.0, 0.0, 0.0, b_e)
    assert predict_allreduce_hosts("recursive_doubling", m, odd) == pytest.approx(
        predict_allreduce("recursive_doubling", m, 3, 0.0, 2 * b_e))


def test_shared_card_against_the_measured_netem_sweep():
    """docs/measured/hierarchical-netem.json (2x2 emulated hosts, tbf at 100 Mbit/s): the shared-card
    prediction of hierarchical is the file's predicted_host_link_shared_s and has at most 0.55 x the
    measured/predicted ratio of the per-rank-link one at every size; ring and binary_tree_star keep their predictions (one crossing per host)."""
    rows = json.loads((ROOT / "docs" / "measured" / "hierarchical-netem.json").read_text())["rows"]
    links = HostLinks((2, 2), 0.0, 0.0, 5e-5, link_beta(1e8))
    seen = 0
    for r in rows:
        if r["link"] != "100mbit" or r["algorithm"] == "mpi":
            continue
        new = predict_allreduce_hosts(r["algorithm"], r["size"], links)
        if r["algorithm"] == "hierarchical":
            seen += 1
            assert new == pytest.approx(r["predicted_host_link_shared_s"])
            assert r["time_s"] / new <= 0.55 * r["measured_over_predicted"]
            assert r["time_s"] >= new                       # the model stays a lower bound of the measured time
        else:
            assert new == pytest.approx(r["predicted_s"])
    assert seen == 4


@pytest.mark.parametrize("bad", [dict(ranks_per_host=()), dict(ranks_per_host=(2, 0)), dict(inter_beta=-1.0),
                                 dict(intra_alpha_s=float("nan"))])
def test_bad_host_links_name_the_key(bad):
    args = dict(ranks_per_host=(2, 2), intra_alpha_s=0.0, intra_beta=0.0, inter_alpha_s=0.0, inter_beta=1e-9)
    args.update(bad)
    with pytest.raises(ValueError, match=next(iter(bad))):
        HostLinks(**args)


def test_auto_takes_hierarchical_across_hosts_above_small_messages():
    big = 1 << 20
    assert choose_algorithm(big, 4, hosts=[2, 2]) == "hierarchical"
    assert choose_algorithm(big, 4, deterministic=True, hosts=[2, 2]) == "hierarchical"
    assert choose_algorithm(big, 4, hosts=[4]) == choose_algorithm(big, 4)          # one host: as before
    assert choose_algorithm(big, 4, hosts=[3, 1]) == choose_algorithm(big, 4)       # a host of one rank
    assert choose_algorithm(1024, 4, hosts=[2, 2]) == choose_algorithm(1024, 4)     # small: as before
    assert predict_allreduce_hosts("auto", big, HostLinks((2, 2), 0, 0, 0, 1e-9)) == \
        predict_allreduce_hosts("hierarchical", big, HostLinks((2, 2), 0, 0, 0, 1e-9))
