"""The emulated-hosts launcher's pieces without launching: ssh's argument forms, Hydra's ``-hosts``, the
two-level cost model and ``auto`` across hosts."""

from __future__ import annotations

import os

import pytest

from hpcbench.collectives import choose_algorithm
from hpcbench.collectives.cost import link_beta, predict_allreduce
from hpcbench.collectives.linkcost import HostLinks, fastest_allreduce_hosts, predict_allreduce_hosts
from hpcbench.runtime import launch
from hpcbench.runtime.emulated_hosts import hosts_argument, launcher_path, mpiexec_arguments
from hpcbench.runtime.emulated_ssh import split_ssh_arguments


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
    assert predict_allreduce_hosts("hierarchical", m, links) == pytest.approx(2 * 0.5 * (m / 2) * inter)
    # the ring waits for a message across hosts at every step: the registered model at the slow link
    assert predict_allreduce_hosts("ring", m, links) == pytest.approx(predict_allreduce("ring", m, 4, 0.0, inter))
    # every link alike: the registered single-level models with hosts of local_size ranks
    same = HostLinks((2, 2), 1e-5, 1e-9, 1e-5, 1e-9)
    for alg in ("hierarchical", "binary_tree_star"):
        assert predict_allreduce_hosts(alg, m, same) == pytest.approx(
            predict_allreduce(alg, m, 4, 1e-5, 1e-9, local_size=2))
    best, times = fastest_allreduce_hosts(["ring", "binary_tree_star", "hierarchical"], [m], links)
    assert best == "hierarchical" and times["hierarchical"] < times["ring"]
    # one host: the inter-host link is never used
    assert predict_allreduce_hosts("hierarchical", m, HostLinks((4,), 0.0, 1e-9, 0.0, 1.0)) < 1e-2
    assert list(links.betas()) == [inter] * 4


def test_hierarchical_uneven_hosts_use_the_smallest_hosts_shards():
    links = HostLinks((3, 1), 0.0, 0.0, 0.0, 1e-9)
    assert predict_allreduce_hosts("hierarchical", 1000, links) == pytest.approx(2 * 0.5 * 1000 * 1e-9)


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
