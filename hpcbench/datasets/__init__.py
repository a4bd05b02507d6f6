"""Readers of real dataset layouts, shared by the runners (core: numpy in, numpy out).

- :mod:`.idx`: the IDX files of MNIST, Fashion-MNIST, EMNIST and KMNIST (gzip or plain);
- :mod:`.leaf`: LEAF's JSON layout (``train/`` and ``test/`` folders of ``{"users", "num_samples",
  "user_data"}`` files);
- :mod:`.fedscale`: FedScale's ``client_data_mapping/{train,test}.csv`` and the image files they name;
- :mod:`.nodeshare`: arrays read once per node and mapped by every rank of it (MPI shared memory);
- :mod:`.callables`: ``package.module:callable`` names of user factories, and their provenance.

Nothing here imports a runner, MPI (but :mod:`.nodeshare`, when called) or torch.
"""
