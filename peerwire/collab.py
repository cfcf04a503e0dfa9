"""Rules of the collaboration profile: a parent/child tree of agents (no I/O here).

The root agent is ``/root``; a child spawned with task name ``review`` is
``/root/review``, and its child ``tests`` is ``/root/review/tests``. Any agent
in the tree addresses any other by its path; the sender is always the calling
session. Capacity is deliberate and visible: 4 active children, 32 retained,
3 levels below the root, and a child turn may run 10 minutes.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .envelope import form_head
from .errors import Code, PeerwireError

ROOT = "/root"
CHILD_PROVIDER = "codex"
"""Children are threads of their root's Codex app-server: the provider that starts and runs them."""
ROOT_PROVIDERS = (CHILD_PROVIDER,)
"""The providers whose agents can root a tree: those with native collaboration (Codex's own message format,
children as threads of the root's runtime). Any other provider gets the messaging tools only."""
MAX_ACTIVE_CHILDREN = 4
MAX_RETAINED_CHILDREN = 32
MAX_DEPTH = 3
CHILD_TURN_LIMIT_S = 600.0

WAIT_DEFAULT_MS = 30_000
WAIT_MIN_MS = 10_000
WAIT_MAX_MS = 3_600_000

ACTIVE_STATUSES = ("starting", "active")

USER_INPUT_MESSAGE = "new input from the user"
"""What wait_agent's ``message`` says when the user's input woke it (the input itself is in the thread)."""

TASK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")  # the schema's own text; used with fullmatch


def check_root_provider(provider: str) -> None:
    """Refuse to make an agent of ``provider`` a tree's root unless that provider has native collaboration."""
    if provider not in ROOT_PROVIDERS:
        raise PeerwireError(Code.INVALID_ARGUMENT,
                            f"--collab-root (collab_root) needs provider {' or '.join(ROOT_PROVIDERS)}: the "
                            f"collaboration tools are Codex's native collaboration, which provider {provider!r} "
                            "lacks; register it without --collab-root to give it the messaging tools",
                            {"provider": provider, "root_providers": list(ROOT_PROVIDERS)})


def child_path(parent_path: str, task_name: str) -> str:
    if not isinstance(task_name, str) or not TASK_NAME.fullmatch(task_name):
        raise PeerwireError(Code.INVALID_ARGUMENT,
                            "task_name must be 1-32 lowercase letters, digits, '_' or '-', starting with a "
                            "letter or digit (it becomes the child's path segment)")
    path = f"{parent_path}/{task_name}"
    if depth(path) > MAX_DEPTH:
        raise PeerwireError(Code.LIMIT_EXCEEDED,
                            f"{path} would be {depth(path)} levels below {ROOT}; the limit is {MAX_DEPTH}",
                            {"limit": "depth", "max": MAX_DEPTH})
    return path


def depth(path: str) -> int:
    """Levels below the root: ``/root`` is 0, ``/root/a`` is 1."""
    return path.count("/") - 1


def is_path(target: Any) -> bool:
    return isinstance(target, str) and (target == ROOT or target.startswith(ROOT + "/"))


def check_capacity(children: Iterable[dict[str, Any]]) -> None:
    """Refuse a spawn when the tree is at its active or retained capacity."""
    children = list(children)
    active = [c for c in children if c["status"] in ACTIVE_STATUSES]
    if len(active) >= MAX_ACTIVE_CHILDREN:
        raise PeerwireError(Code.LIMIT_EXCEEDED,
                            f"{len(active)} children are active; the limit is {MAX_ACTIVE_CHILDREN}: wait for one "
                            "to finish", {"limit": "active_children", "max": MAX_ACTIVE_CHILDREN})
    if len(children) >= MAX_RETAINED_CHILDREN:
        raise PeerwireError(Code.LIMIT_EXCEEDED,
                            f"{len(children)} children are retained; the limit is {MAX_RETAINED_CHILDREN}",
                            {"limit": "retained_children", "max": MAX_RETAINED_CHILDREN})


def wait_timeout_ms(value: Any) -> int:
    """wait_agent's timeout: default 30 s, raised to at least 10 s, above one hour refused.

    Its schema types it ``number`` (what Codex's tool definitions take), but it
    counts milliseconds: a fractional value is refused, never truncated."""
    if value is None:
        return WAIT_DEFAULT_MS
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise PeerwireError(Code.INVALID_ARGUMENT, "timeout_ms must be a number of milliseconds")
    if isinstance(value, float) and not value.is_integer():
        raise PeerwireError(Code.INVALID_ARGUMENT, f"timeout_ms {value} is not a whole number of milliseconds")
    if value > WAIT_MAX_MS:
        raise PeerwireError(Code.INVALID_ARGUMENT, f"timeout_ms {value} is above the maximum of {WAIT_MAX_MS} "
                            "(one hour)")
    return max(int(value), WAIT_MIN_MS)


def fork_turns(value: Any) -> str | int:
    """``all`` (default), ``none``, or a positive number of latest user turns."""
    if value is None or value == "all":
        return "all"
    if value == "none":
        return "none"
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    raise PeerwireError(Code.INVALID_ARGUMENT,
                        "fork_turns is 'all', 'none' or a positive integer string such as '2'")


def render(message_type: str, recipient_path: str, sender_path: str, body: str) -> str:
    """The collaboration envelope: message type (:data:`peerwire.envelope.MESSAGE_TYPES`), task name, sender,
    payload."""
    return head(message_type, recipient_path, sender_path) + "\n" + body


def head(message_type: str, recipient_path: str, sender_path: str) -> str:
    """The collaboration envelope without its body (its routing metadata), ending with ``Payload:``: the form
    ``collab`` of ``contracts/envelope.json``."""
    return form_head("collab", None, {"message_type": message_type, "recipient_path": recipient_path,
                                      "sender_path": sender_path})


PLAINTEXT = "plaintext"
ENCRYPTED = "encrypted"


def message_encryption(call: dict[str, Any]) -> str:
    """Whether a collaboration message tool call's ``message`` is plaintext or opaque, by its raw
    ``function_call`` item's ``encrypted_function_args``.

    An empty list means plaintext. An absent field and a populated list both
    mean the message is encrypted: it is forwarded as it came, never decrypted
    here. Any other value of the field is refused (``invalid_argument``).
    """
    if "encrypted_function_args" not in call or call["encrypted_function_args"] is None:
        return ENCRYPTED
    listed = call["encrypted_function_args"]
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        raise PeerwireError(Code.INVALID_ARGUMENT, "encrypted_function_args must be a list of argument names",
                            {"encrypted_function_args": repr(listed)[:200]})
    return ENCRYPTED if listed else PLAINTEXT


def agent_message(author: str, recipient: str, head: str, body: str, encryption: str = PLAINTEXT) -> dict[str, Any]:
    """A native agent message item (``thread/inject_items``) carrying an envelope: its head (routing) as
    text, then the body: text when plaintext, else the opaque message as ``encrypted_content``."""
    payload = ({"type": "input_text", "text": body} if encryption == PLAINTEXT
               else {"type": "encrypted_content", "encrypted_content": body})
    return {"type": "agent_message", "author": author, "recipient": recipient,
            "content": [{"type": "input_text", "text": head}, payload]}
