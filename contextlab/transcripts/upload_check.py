"""The child process of an upload's check (``services.check_upload``, for files of at least
``UPLOAD_CHECK_CHILD_MIN_BYTES``): ``python -m contextlab.transcripts.upload_check`` reads the
request (a pickled ``checking.CheckRequest``, from its parent) on stdin, checks the file
(``checking.check_here``: the engine's parse, the session's columns, the parse left for the
replay) and writes the pickled ``checking.Checked`` or ``checking.UploadRejected`` to the
request's ``out`` file. Its memory all goes back to the system when it exits. It imports the
engine and ``checking`` only, and sets no Django up: what it holds beside the parse counts
against the worker's memory as much as the parse does.
"""

from __future__ import annotations

import logging
import pickle
import sys


def main() -> int:
    from contextlab.transcripts import checking

    request: checking.CheckRequest = pickle.loads(sys.stdin.buffer.read())  # from our parent
    answer: checking.Checked | checking.UploadRejected
    try:
        answer = checking.check_here(request)
    except checking.UploadRejected as exc:
        answer = exc
    partial = request.out.with_suffix(".partial")
    with partial.open("wb") as fh:
        pickle.dump(answer, fh, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(request.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
