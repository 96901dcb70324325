"""Secrets in a script's command line are not recorded: ``--api-key sk-...`` becomes
``--api-key <redacted>`` in the summary, the report and every file of the run.

Place in the pipeline: wherever a script's arguments are written (its spec's title, the
script's record, the worker spec kept in the run folder); the script itself gets them as
given. A value is redacted when the option it belongs to names a secret (``SECRET_NAMES``:
key, token, secret, password, credential, auth ...) or when it looks like a token itself
(``TOKEN``: a known key prefix, or a long run of letters and digits mixing both).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "<redacted>"
#: Option names that hold a secret (``--api-key``, ``--hf_token``, ``--db-password``).
SECRET_NAMES = re.compile(
    r"key|token|secret|passw(or)?d|pwd|credential|auth|cookie|session[-_]?id", re.IGNORECASE
)
#: Values that look like a token on their own: a known prefix, 32+ characters mixing upper-
#: and lower-case letters and digits, or 40+ hex digits (a run name such as
#: ``resnet50_imagenet_run1`` is none of these).
TOKEN = re.compile(
    r"^(sk-|sk_|ghp_|gho_|github_pat_|xox[abpr]-|AKIA|ASIA|hf_|glpat-|AIza)[\w-]{8,}$"
    r"|^(?=[\w+/=-]*\d)(?=[\w+/=-]*[a-z])(?=[\w+/=-]*[A-Z])[\w+/=-]{32,}$"
    r"|^[0-9a-fA-F]{40,}$"
)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of secret-named options and token-like values redacted."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next and not arg.startswith("-"):
            out.append(REDACTED)
            secret_next = False
            continue
        secret_next = False
        if arg.startswith("-"):
            name, eq, value = arg.partition("=")
            if SECRET_NAMES.search(name.lstrip("-")):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(arg)
                    secret_next = True
                continue
            if eq and TOKEN.match(value):
                out.append(f"{name}={REDACTED}")
                continue
            out.append(arg)
            continue
        key, eq, value = arg.partition("=")
        if eq and SECRET_NAMES.search(key):  # key=value arguments (hydra, fire)
            out.append(f"{key}={REDACTED}")
        elif TOKEN.match(arg):
            out.append(REDACTED)
        else:
            out.append(arg)
    return out
