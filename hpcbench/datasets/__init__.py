"""Readers of real data sets and dataset layouts, shared by the runners (core: numpy in, numpy out).

- :mod:`.digits`: scikit-learn's copy of the UCI 8x8 handwritten digits (without importing scikit-learn);
- :mod:`.shakespeare`: the bundled tiny-shakespeare text and its character codes;
- :mod:`.idx`: the IDX files of MNIST, Fashion-MNIST, EMNIST and KMNIST (gzip or plain);
- :mod:`.leaf`: LEAF's JSON layout (``train/`` and ``test/`` folders of ``{"users", "num_samples",
  "user_data"}`` files);
- :mod:`.fedscale`: FedScale's ``client_data_mapping/{train,test}.csv`` and the image files they name;
- :mod:`.nodeshare`: arrays read once per node and mapped by every rank of it (MPI shared memory);
- :mod:`.callables`: ``package.module:callable`` names of user factories, a user's arrays checked, their provenance;
- :mod:`.installed`: data sets installed apart from hpcbench (default folder, how to get them), for ``requires``.

A reader returns the whole data set (arrays or text); how a runner splits it (FL clients, data-parallel
workers, a held-out part) stays with the runner. Nothing here imports a runner, MPI (but :mod:`.nodeshare`,
when called) or torch.
"""
