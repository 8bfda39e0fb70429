"""Exceptions raised by the lis client; names follow E2B's where they mean the same."""


class SandboxException(Exception):
    """An error answered by lis serve (message is the server's) or met talking to it."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        self.status = status


class InvalidArgumentException(SandboxException):
    """The server refused the request's arguments (HTTP 400; 413 too large, 422
    over a bound, as the episodes API answers them)."""


class NotFoundException(SandboxException):
    """No such sandbox, file or image (HTTP 404)."""


class ConflictException(SandboxException):
    """The sandbox is busy, being created or deleted (HTTP 409)."""


class NotImplementedException(SandboxException):
    """The server does not do this yet (HTTP 501)."""


class TimeoutException(SandboxException):
    """A command ran longer than its timeout and was killed; or lis serve did
    not answer a request within the client's timeout (REQUEST_TIMEOUT)."""


def from_status(status, message):
    cls = {400: InvalidArgumentException, 413: InvalidArgumentException,
           422: InvalidArgumentException, 404: NotFoundException, 409: ConflictException,
           501: NotImplementedException}.get(status, SandboxException)
    return cls(message, status)
