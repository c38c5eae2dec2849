"""Translate azure-core exceptions into the project's own, at the storage boundary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

from shared.core.errors import (
    AlreadyExists,
    Conflict,
    EtagMismatch,
    NotFound,
    StorageError,
    StorageForbidden,
    StorageUnavailable,
)
from shared.observability.metering import METER


@contextmanager
def storage_call(what: str) -> Iterator[None]:
    """Run a Storage call and re-raise its failure as a :class:`ThematiqError`."""
    # METER, the process's: it is the meter the process's cached SDK clients' response hook feeds
    # (``shared.storage.connections``), so it is the one that saw this thread's tries. The fake never raises a
    # connection error after an answer; tests that simulate one feed METER's hook (tests/support/faults.py).
    answered = METER.answered()
    try:
        yield
    except ResourceModifiedError as err:
        raise EtagMismatch(f"{what}: the entity changed") from err
    except ResourceNotFoundError as err:
        raise NotFound(f"{what}: not found") from err
    except ResourceExistsError as err:
        raise AlreadyExists(f"{what}: already exists") from err
    except ServiceRequestError as err:
        # The last try could not connect. Nothing was applied only if no earlier try was answered
        # (a 5xx that committed, then a retry that could not connect, ends here too).
        maybe = METER.answered() > answered
        raise StorageUnavailable(f"{what}: storage unreachable", maybe_applied=maybe) from err
    except ServiceResponseError as err:
        raise StorageUnavailable(f"{what}: storage did not answer") from err
    except HttpResponseError as err:
        code = err.status_code or 0
        if code == 412:
            raise EtagMismatch(f"{what}: the entity changed") from err
        if code == 409:
            raise AlreadyExists(f"{what}: conflict") from err
        if code in (408, 429) or code >= 500:
            raise StorageUnavailable(f"{what}: storage busy ({code})") from err
        if code in (401, 403):
            raise StorageForbidden(f"{what}: storage refused the app ({code} {getattr(err, 'error_code', '')})") from err
        raise StorageError(f"{what}: storage refused the request ({code} {getattr(err, 'error_code', '')})") from err
    except AzureError as err:
        raise StorageUnavailable(f"{what}: {type(err).__name__}") from err


__all__ = ["AlreadyExists", "Conflict", "EtagMismatch", "storage_call"]
