"""Output file names from templates (``results/{job_name}-{start}.h5``), plain field names only.

Used by the job lifecycle (:mod:`hpcbench.lifecycle`) for a runner's results
file and by runners for the other files they name from their config (an FL
checkpoint). This module does not import MPI, h5py or torch.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Mapping

from hpcbench.runtime.errors import InputError

__all__ = ["format_output_path"]


def format_output_path(template: str, fields: Mapping[str, Any], key: str = "output") -> Path:
    """Fill an output-file template (``results/{job_name}-{start}.h5``).

    Fields are plain names only: attribute or index access
    (``{job_name.__class__}``, ``{job_name[0]}``), conversions (``!r``),
    format specifications and positional fields (``{}``) are refused.

    Raises
    ------
    InputError
        The template names an unknown field, uses anything but plain field
        names, is malformed, or is empty; the message names ``key``, the
        template and the known fields.
    """
    known = ", ".join("{" + k + "}" for k in fields)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InputError(f"{key}: bad file-name template {template!r} ({exc}); it may use {known}") from None
    for _, name, spec, conversion in parts:
        if name is not None and (not name.isidentifier() or spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise InputError(f"{key}: file-name template {template!r} uses {shown}; only plain field "
                             f"names are allowed: {known}")
    try:
        text = template.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise InputError(f"{key}: bad file-name template {template!r} ({type(exc).__name__}: {exc}); "
                         f"it may use {known}") from None
    if not text.strip():
        raise InputError(f"{key}: empty file name")
    from hpcbench.runtime.outputs import refuse_folder_name

    refuse_folder_name(text, key)
    return Path(text)
