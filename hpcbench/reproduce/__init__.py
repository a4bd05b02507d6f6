"""``hpcbench reproduce``: regenerate every figure from the manifest and check every claim.

Modules, one concern each: :mod:`~.manifest` (the YAML, validated),
:mod:`~.expression` (claim quantities, an AST whitelist, never ``eval``),
:mod:`~.plan` (runs of a tier), :mod:`~.ledger` (what ran, what may be
skipped), :mod:`~.local` and :mod:`~.slurm` (launchers), :mod:`~.session`
(the loop), :mod:`~.data` and :mod:`~.claims` (checking), :mod:`~.machine`
and :mod:`~.report` (the HTML report), :mod:`~.command` (the command line).
"""
