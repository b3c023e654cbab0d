"""oras-py's internals that the registry reader uses (bisect_ngc/images/oras_seam.py) are
there in the installed oras, for both of its login schemes: an oras release that moves
one fails here, not in a user's `bisect-ngc diff`."""
from __future__ import annotations

import pytest

from bisect_ngc.images import oras_seam


@pytest.mark.parametrize("scheme", ["basic", "token"])
def test_the_oras_internals_the_registry_reader_uses_are_there(scheme):
    import oras.provider
    client = oras.provider.Registry("127.0.0.1:9", insecure=True, auth_backend=scheme)
    assert oras_seam.missing(client) == []
    oras_seam.set_logins(client, {"auths": {}, "credsStore": None, "credHelpers": {}})
    oras_seam.load_login(client, "127.0.0.1:9")          # none stored: nothing loaded
    assert not oras_seam.has_login(client)
    oras_seam.set_logins(client, {"auths": {"127.0.0.1:9": {"auth": "dTpw"}},
                                  "credsStore": None, "credHelpers": {}})
    oras_seam.load_login(client, "127.0.0.1:9")
    assert oras_seam.has_login(client)
