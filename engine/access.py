"""Who may not do what to a file, said so that the person can act on it.

"Permission denied" names neither whose file it is nor what to do. `denied` says the path's owner and
mode (or which directory on the way stops us), who we are, and the two ways out: the owner shares it,
or the command runs as the owner. Used where a recording, a store or a price table cannot be opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def user_name(uid: int) -> str:
    """`name (uid N)`, or `uid N` for a uid with no name here."""
    import pwd  # only on an error path

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, OverflowError):
        return f"uid {uid}"


def _login(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return f"#{uid}"  # sudo -u takes #UID for a uid with no name


def denied(path: str | Path, want: str = "read") -> str:
    """Why `path` cannot be opened to `want` ("read" or "write") and what to do, after "permission denied".

    The file itself may be readable and a directory above it not searchable: the first directory on the
    way we may not enter is named then, as that is what its owner has to open up."""
    p = Path(os.path.abspath(path))
    me = user_name(os.getuid())
    for d in reversed(p.parents):
        if not os.access(d, os.X_OK):
            try:
                st = os.stat(d)
            except OSError:
                break
            owner = st.st_uid
            return (
                f"Permission denied: directory {d} (owned by {user_name(owner)}, mode "
                f"{stat.S_IMODE(st.st_mode):04o}) cannot be entered by you, {me}: ask its owner to open it (chmod o+x {d}), copy the file "
                f"somewhere you can reach, or run cp-inspect as that user (sudo -u {_login(owner)} cp-inspect ...)"
            )
    try:
        st = os.stat(p)
    except OSError:
        return "Permission denied (check the file's owner and mode)"
    owner = st.st_uid
    bit = "r" if want == "read" else "w"
    if owner == os.getuid():
        fix = f"it is yours: chmod u+{bit} {p}"
    else:
        fix = (
            f"ask its owner to let you {want} it (chmod o+{bit} {p}), or run cp-inspect as that user "
            f"(sudo -u {_login(owner)} cp-inspect ...)"
        )
    return (
        f"Permission denied: it is owned by {user_name(owner)} with mode {stat.S_IMODE(st.st_mode):04o} "
        f"and you are {me}: {fix}"
    )
