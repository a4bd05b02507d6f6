"""The CPU sparse optimizers against torch.optim on the densified gradient, by hand, and jit on/off."""

from __future__ import annotations


import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from hpcbench.collectives.compressed.sparse_sum import SparseSum
from hpcbench.optim import SparseAdam, SparseSGD, coalesce, create
from hpcbench.runtime import jit
from hpcbench.runtime.errors import InputError
from jittools import jit_off

N = 600


def sparse_sum(rng, supports, n=N):
    """A SparseSum of one sorted part per rank (as the allgather's), values float32."""
    parts = [(torch.from_numpy(np.sort(s).astype(np.int32)),
              torch.from_numpy(rng.standard_normal(len(s)).astype(np.float32))) for s in supports]
    return SparseSum(parts, (n,), torch.float32)


def run_both(sparse_opt, dense_cls, kw, grads, average_over=1):
    """Step the sparse optimizer on each SparseSum and torch's on its densified mean; both parameters."""
    x0 = np.random.default_rng(9).standard_normal(N).astype(np.float32)
    xs = torch.tensor(x0)
    xd = torch.nn.Parameter(torch.tensor(x0))
    dense = dense_cls([xd], **kw)
    for g in grads:
        sparse_opt.step("w", xs, g, average_over=average_over)
        xd.grad = g.to_dense() / average_over if average_over != 1 else g.to_dense()
        dense.step()
    return xs.numpy(), xd.detach().numpy(), dense.state[xd]


def close(a, b):
    # torch fuses multiply-adds (one rounding), the sparse loops do not: equal to a few ulps
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_plain_sgd_equals_torch_on_any_support():
    rng = np.random.default_rng(1)
    grads = [sparse_sum(rng, [rng.choice(N, 40, replace=False) for _ in range(3)]) for _ in range(6)]
    a, b, _ = run_both(SparseSGD(lr=0.05), torch.optim.SGD, dict(lr=0.05), grads, average_over=3)
    close(a, b)


@pytest.mark.parametrize("cls,dense,kw", [
    (SparseSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (SparseSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3)),
    (SparseSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.8, nesterov=True, maximize=True)),
    (SparseAdam, torch.optim.Adam, dict(lr=0.01)),
    (SparseAdam, torch.optim.Adam, dict(lr=0.01, betas=(0.5, 0.9), amsgrad=True, maximize=True)),
])
def test_fixed_support_equals_torch(cls, dense, kw):
    """The same indices every step: the others keep zero state in the dense optimizer too."""
    rng = np.random.default_rng(2)
    support = [rng.choice(N, 30, replace=False), rng.choice(N, 30, replace=False)]
    grads = [sparse_sum(rng, support) for _ in range(5)]
    a, b, _ = run_both(cls(**kw), dense, kw, grads)
    close(a, b)


@pytest.mark.parametrize("cls,dense,kw", [
    (SparseSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    (SparseAdam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
])
def test_weight_decay_equals_torch_at_full_density(cls, dense, kw):
    rng = np.random.default_rng(3)
    grads = [sparse_sum(rng, [np.arange(N)]) for _ in range(4)]
    a, b, _ = run_both(cls(**kw), dense, kw, grads)
    close(a, b)


def test_adam_first_step_equals_torch_everywhere():
    rng = np.random.default_rng(4)
    a, b, _ = run_both(SparseAdam(lr=0.01), torch.optim.Adam, dict(lr=0.01),
                       [sparse_sum(rng, [rng.choice(N, 50, replace=False)] * 2)])
    close(a, b)


def test_smart_momentum_is_the_dense_buffer_and_the_skipped_steps_written_out():
    """Buffers equal the dense ones on touched indices; x + the left-out updates = the dense x."""
    rng = np.random.default_rng(5)
    lr, mu = 0.1, 0.9
    opt = SparseSGD(lr=lr, momentum=mu, smart_momentum=True)
    x0 = rng.standard_normal(N).astype(np.float32)
    xs, xd = torch.tensor(x0), torch.nn.Parameter(torch.tensor(x0))
    dense = torch.optim.SGD([xd], lr=lr, momentum=mu)
    left_out = np.zeros(N)       # what dense SGD moved each untouched index by (float64)
    b = np.zeros(N)
    seen = np.zeros(N, bool)
    for _ in range(8):
        support = rng.choice(N, 60, replace=False)
        g = sparse_sum(rng, [support])
        untouched = np.ones(N, bool)
        untouched[support] = False
        b[untouched] *= mu                      # the dense buffer decays where nothing came
        left_out[untouched & seen] -= lr * b[untouched & seen]
        opt.step("w", xs, g)
        xd.grad = g.to_dense()
        dense.step()
        buf = opt.state("w")["momentum_buffer"]
        b[support] = buf[support]
        seen[support] = True
        close(buf[support], dense.state[xd]["momentum_buffer"].numpy()[support])
    close(xs.numpy() + left_out, xd.detach().numpy())


def test_adam_smart_momentum_moments_are_the_dense_ones():
    rng = np.random.default_rng(6)
    opt = SparseAdam(lr=0.01, betas=(0.8, 0.9), smart_momentum=True)
    xs, xd = torch.zeros(N), torch.nn.Parameter(torch.zeros(N))
    dense = torch.optim.Adam([xd], lr=0.01, betas=(0.8, 0.9))
    for _ in range(6):
        support = rng.choice(N, 80, replace=False)
        g = sparse_sum(rng, [support])
        opt.step("w", xs, g)
        xd.grad = g.to_dense()
        dense.step()
        for key in ("exp_avg", "exp_avg_sq"):
            close(opt.state("w")[key][support], dense.state[xd][key].numpy()[support])


@pytest.mark.parametrize("smart", [False, True])
def test_sgd_by_hand(smart):
    """lr 0.5, momentum 0.5: every number below is exact in float32."""
    opt = SparseSGD(lr=0.5, momentum=0.5, smart_momentum=smart)
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    opt.step("w", x, (torch.tensor([1, 3]), torch.tensor([2.0, 4.0])))   # first step: b = g
    assert x.tolist() == [1.0, 1.0, 3.0, 2.0]
    opt.step("w", x, (torch.tensor([0, 1]), torch.tensor([2.0, 2.0])))   # b0 = 2, b1 = 0.5 * 2 + 2
    assert x.tolist() == [0.0, -0.5, 3.0, 2.0]
    opt.step("w", x, (torch.tensor([3]), torch.tensor([0.0])))           # index 3 last updated 2 steps ago
    # plain: b3 = 0.5 * 4 = 2 -> x3 = 2 - 1; smart: b3 = 0.5**2 * 4 = 1 -> x3 = 2 - 0.5
    assert x.tolist() == [0.0, -0.5, 3.0, 1.5 if smart else 1.0]
    assert opt.state("w")["momentum_buffer"].tolist() == [2.0, 3.0, 0.0, 1.0 if smart else 2.0]


def test_adam_by_hand():
    """First step: m = 0.1 g, v = 0.001 g^2, so the step is lr * g / (|g| + eps) = lr * sign(g)."""
    opt = SparseAdam(lr=0.5)
    x = torch.tensor([1.0, 1.0, 1.0])
    opt.step("w", x, (torch.tensor([0, 2]), torch.tensor([2.0, -8.0])))
    assert x.tolist() == pytest.approx([0.5, 1.0, 1.5], abs=1e-6)
    st_ = opt.state("w")
    assert st_["exp_avg"].tolist() == pytest.approx([0.2, 0.0, -0.8])
    assert st_["exp_avg_sq"].tolist() == pytest.approx([0.004, 0.0, 0.064])


def test_sparse_sum_taken_without_densifying(monkeypatch):
    """Overlapping per-rank parts are summed in rank order: bitwise the dense result's values."""
    rng = np.random.default_rng(7)
    g = sparse_sum(rng, [rng.choice(N, 200, replace=False) for _ in range(4)])
    dense = g.to_dense().numpy()
    for name in ("to_dense", "add_to", "coalesce"):
        monkeypatch.setattr(SparseSum, name, lambda *a, **k: pytest.fail("densified"))
    c = coalesce(g, N)
    assert np.all(np.diff(c.indices) > 0)
    assert np.array_equal(c.values.view(np.int32), dense[c.indices].view(np.int32))
    assert set(np.flatnonzero(dense)) <= set(c.indices)
    x1, x2 = torch.ones(N), torch.ones(N)
    SparseSGD(lr=0.1).step("w", x1, g)
    SparseSGD(lr=0.1).step("w", x2, (torch.from_numpy(c.indices), torch.from_numpy(c.values)))
    assert torch.equal(x1, x2)


#: every option branch of the loops at least once (each configuration is compiled once, a second or so)
CONFIGS = [
    lambda: SparseSGD(lr=0.1),
    lambda: SparseSGD(lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True, nesterov=True, smart_momentum=True),
    lambda: SparseSGD(lr=0.1, momentum=0.9, dampening=0.2),
    lambda: SparseAdam(lr=0.01, weight_decay=0.01, amsgrad=True, maximize=True, smart_momentum=True),
    lambda: SparseAdam(lr=0.01, betas=(0.3, 0.9)),     # 1 - beta1 >= 0.5: lerp's other branch
]


@pytest.mark.skipif(not jit.enabled(), reason="numba not installed")
@pytest.mark.parametrize("config", range(len(CONFIGS)))
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2 ** 16), parts=st.integers(1, 4), k=st.integers(0, 120), sorted_parts=st.booleans())
def test_compiled_and_numpy_paths_bitwise_equal(config, seed, parts, k, sorted_parts):
    def run():
        rng = np.random.default_rng(seed)
        opt = CONFIGS[config]()
        x = torch.from_numpy(rng.standard_normal(N).astype(np.float32))
        for _ in range(4):
            ps = []
            for _ in range(parts):
                idx = rng.choice(N, k, replace=False)
                if sorted_parts:
                    idx = np.sort(idx)
                ps.append((torch.from_numpy(idx), torch.from_numpy(rng.standard_normal(k).astype(np.float32))))
            opt.step("w", x, SparseSum(ps, (N,), torch.float32), average_over=parts)
        return x.numpy().view(np.int32).copy()

    compiled = run()
    with jit_off():
        plain = run()
    assert np.array_equal(compiled, plain)


def test_float64_parameters_and_repeated_pairs():
    x = np.zeros(5)
    SparseSGD(lr=1.0).step("w", x, (np.array([4, 1, 4]), np.array([1.0, 2.0, 3.0])))
    assert x.tolist() == [0.0, -2.0, 0.0, 0.0, -4.0]


@pytest.mark.parametrize("call,exc,needle", [
    (lambda o: o.step("w", torch.zeros(4, dtype=torch.int32), (torch.tensor([0]), torch.tensor([1.0]))),
     ValueError, "float32 or float64"),
    (lambda o: o.step("w", torch.zeros(4), (torch.tensor([4]), torch.tensor([1.0]))), ValueError, "out of range"),
    (lambda o: o.step("w", torch.zeros(4), (torch.tensor([0, 1]), torch.tensor([1.0]))), ValueError, "length"),
    (lambda o: o.step("w", torch.zeros(4), object()), TypeError, "gradient"),
    (lambda o: o.step("w", torch.zeros(4).t(), (torch.tensor([0]), torch.tensor([1.0])), average_over=0),
     ValueError, "average_over"),
])
def test_bad_input_is_refused(call, exc, needle):
    with pytest.raises(exc, match=needle):
        call(SparseSGD(lr=0.1))


def test_size_change_and_registry_errors():
    opt = SparseSGD(lr=0.1, momentum=0.9)
    opt.step("w", torch.zeros(4), (torch.tensor([0]), torch.tensor([1.0])))
    with pytest.raises(ValueError, match="4 at its first step"):
        opt.step("w", torch.zeros(5), (torch.tensor([0]), torch.tensor([1.0])))
    with pytest.raises(InputError, match="registered: sgd, adam"):
        create("lamb")
    with pytest.raises(InputError, match="nesterov"):
        create("sgd", lr=0.1, nesterov=True)
    with pytest.raises(InputError, match="betas"):
        create("adam", betas=(1.0, 0.9))
    assert isinstance(create("adam", lr=0.1), SparseAdam)
