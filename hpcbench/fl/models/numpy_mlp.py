"""The ``mlp``/``logreg`` models in numpy: forward, cross-entropy and exact gradients, no torch.

The torch-free client-training engine (``client_training: numpy``,
:mod:`hpcbench.fl.engines.numpy_training`) trains these. A model is a flat float32
parameter vector laid out exactly as ``torch.nn.utils.parameters_to_vector``
lays out :class:`hpcbench.fl.models.mlp.MLP`'s parameters (first layer's
weight ``(hidden, in)`` row-major, its bias, second layer's weight
``(classes, hidden)``, its bias; logistic regression: one weight
``(classes, in)`` and its bias), so a vector moves between the two engines
unchanged. Every operation works on a stack of ``m`` clients' vectors at once
(shape ``(m, P)``): a client's matrices are views into its row, and the
products are batched ``np.matmul`` calls over the stack.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NumpyMLP"]


class NumpyMLP:
    """``in_features -> hidden (ReLU) -> num_classes`` (logistic regression when ``hidden == 0``) in numpy.

    Parameters
    ----------
    in_features, hidden, num_classes : int
        ``hidden == 0``: one linear layer (``logreg``).

    Notes
    -----
    Initialisation (:meth:`init_parameters`) draws every weight and bias
    from ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, the distribution
    ``torch.nn.Linear`` uses (Kaiming-uniform with ``a = sqrt(5)`` gives the
    same bound for the weight), but from numpy's generator: the same
    distribution, not the same draws as the torch engine for a seed.
    """

    input_kind = "features"

    def __init__(self, in_features: int, hidden: int, num_classes: int) -> None:
        self.in_features, self.hidden, self.num_classes = int(in_features), int(hidden), int(num_classes)
        if self.hidden:
            layers = [(self.hidden, self.in_features), (self.num_classes, self.hidden)]
        else:
            layers = [(self.num_classes, self.in_features)]
        #: (weight shape, bias length) of each layer, in order
        self.layers = [(shape, shape[0]) for shape in layers]
        self.num_parameters = sum(o * i + o for (o, i), _ in self.layers)
        self.initial = np.zeros(self.num_parameters, np.float32)

    @classmethod
    def build(cls, cfg, dataset, seed: int) -> "NumpyMLP":
        """The model of config section ``cfg`` (``name`` mlp or logreg) for ``dataset``, initialised from ``seed``."""
        model = cls(dataset.num_features, cfg.hidden if cfg.name == "mlp" else 0, dataset.num_classes)
        model.initial = model.init_parameters(seed)
        return model

    def init_parameters(self, seed: int) -> np.ndarray:
        """A flat float32 vector of shape ``(num_parameters,)`` drawn as ``nn.Linear`` does (see class notes)."""
        rng = np.random.default_rng([int(seed), 0x4D4C50])
        parts = []
        for (out, fan_in), _ in self.layers:
            bound = 1.0 / np.sqrt(fan_in)
            parts.append(rng.uniform(-bound, bound, out * fan_in))
            parts.append(rng.uniform(-bound, bound, out))
        return np.concatenate(parts).astype(np.float32)

    def views(self, flat: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per layer ``(weight, bias)`` views of a stack ``flat`` of shape ``(m, P)``: ``(m, out, in)``, ``(m, out)``."""
        out, pos = [], 0
        for (o, i), _ in self.layers:
            w = flat[:, pos:pos + o * i].reshape(flat.shape[0], o, i)
            pos += o * i
            out.append((w, flat[:, pos:pos + o]))
            pos += o
        return out

    def logits(self, flat: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Logits of shape ``(m, B, classes)`` of stack ``flat`` ``(m, P)`` on inputs ``x`` ``(m, B, in)``, float32."""
        return self._forward(self.views(flat), x)[0]

    def _forward(self, layers, x):
        acts = [x]
        h = x
        for k, (w, b) in enumerate(layers):
            h = np.matmul(h, w.transpose(0, 2, 1))
            h += b[:, None, :]
            if k + 1 < len(layers):
                np.maximum(h, 0.0, out=h)
                acts.append(h)
        return h, acts

    @staticmethod
    def sample_losses(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Cross-entropy (nat) of each example, float32 of shape ``(m, B)``; ``targets`` int ``(m, B)``."""
        shifted = logits - logits.max(axis=-1, keepdims=True)
        logsum = np.log(np.exp(shifted).sum(axis=-1))
        return logsum - np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]

    def loss_and_grad(self, flat: np.ndarray, x: np.ndarray, y: np.ndarray,
                      grad: np.ndarray) -> np.ndarray:
        """Per-example losses and the gradient of each client's mean cross-entropy.

        For every client ``k`` of the stack, the loss is ``L_k = (1/B) sum_b
        CE(f(w_k, x_kb), y_kb)`` (``torch.nn.functional.cross_entropy`` with
        mean reduction); its exact gradient by back-propagation: ``dL/dz =
        (softmax(z) - onehot(y)) / B`` at the logits, then through each
        linear layer (``dW = dz^T a``, ``db = sum_b dz``, ``da = dz W``) and
        ReLU (``da * [pre-activation > 0]``).

        Parameters
        ----------
        flat : ndarray of shape (m, P), float32
        x : ndarray of shape (m, B, in_features), float32
        y : ndarray of shape (m, B), int64
        grad : ndarray of shape (m, P), float32
            Overwritten with the gradients.

        Returns
        -------
        ndarray of shape (m, B), float32
            Each example's cross-entropy.
        """
        layers = self.views(flat)
        logits, acts = self._forward(layers, x)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        e = np.exp(shifted)
        total = e.sum(axis=-1, keepdims=True)
        losses = np.log(total[..., 0]) - np.take_along_axis(shifted, y[..., None], axis=-1)[..., 0]
        dz = e / total
        np.put_along_axis(dz, y[..., None], np.take_along_axis(dz, y[..., None], axis=-1) - 1.0, axis=-1)
        dz *= np.float32(1.0 / x.shape[1])
        grads = self.views(grad)
        for k in range(len(layers) - 1, -1, -1):
            gw, gb = grads[k]
            np.matmul(dz.transpose(0, 2, 1), acts[k], out=gw)
            gb[...] = dz.sum(axis=1)
            if k:
                da = np.matmul(dz, layers[k][0])
                da *= acts[k] > 0
                dz = da
        return losses
