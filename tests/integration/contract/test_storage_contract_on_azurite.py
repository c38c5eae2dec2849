"""The storage contract on Azurite: the backend scenarios of ``tests/unit/contract/test_storage_contract.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.contract import test_storage_contract

collect_again(test_storage_contract, globals())
