"""AWS SigV4 for Bedrock, through botocore (the optional extra ``prefixlock[bedrock]``).

The only module that imports botocore. The payload hash is taken over the body's
fragments as they will be sent (no joined copy of the body), and botocore's own
``SigV4Auth`` signs the method, the URL, the headers and that hash for the service
``bedrock`` (docs.aws.amazon.com/bedrock/latest/APIReference/welcome.html: "Signature
Version 4"), as boto3's ``bedrock-runtime`` client would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

# botocore ships no type information
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]
from botocore.session import Session  # type: ignore[import-untyped]

from ..core.errors import UsageError
from .config import Secret

__all__ = ["SigV4Signer", "payload_hash"]

#: the signing name of the Bedrock runtime API
SERVICE = "bedrock"


def payload_hash(fragments: Iterable[bytes]) -> str:
    """The hex SHA-256 of the concatenated fragments."""
    digest = hashlib.sha256()
    for fragment in fragments:
        digest.update(fragment)
    return digest.hexdigest()


class _PrehashedSigV4(SigV4Auth):  # type: ignore[misc]
    """SigV4 with the payload hash given, so the body needs no single buffer."""

    def __init__(self, credentials: Any, region: str, digest: str, service: str) -> None:
        super().__init__(credentials, service, region)
        self._digest = digest

    def payload(self, request: Any) -> str:
        return self._digest


class SigV4Signer:
    """Signs Bedrock calls with explicit credentials, else botocore's default chain
    (environment variables, shared config and credentials files, instance roles)."""

    def __init__(
        self,
        region: str,
        access_key: Secret | None = None,
        secret_key: Secret | None = None,
        session_token: Secret | None = None,
        *,
        provider: str = "bedrock-converse",
    ) -> None:
        self.region = region
        if access_key is not None and secret_key is not None:
            self._credentials: Any = Credentials(
                access_key.value,
                secret_key.value,
                None if session_token is None else session_token.value,
            )
        else:
            found = Session().get_credentials()
            if found is None:
                raise UsageError(
                    f"{provider}: no AWS credentials (give aws_access_key_id and "
                    "aws_secret_access_key, set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                    "configure a profile, or set AWS_BEARER_TOKEN_BEDROCK)"
                )
            self._credentials = found

    def __repr__(self) -> str:
        return f"SigV4Signer(region={self.region!r})"

    def secrets(self) -> tuple[str, ...]:
        frozen = self._credentials.get_frozen_credentials()
        return tuple(v for v in (frozen.secret_key, frozen.token) if v)

    def sign(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        digest: str,
        service: str = SERVICE,
    ) -> dict[str, str]:
        """``headers`` plus ``X-Amz-Date``, ``Authorization`` (and the session token),
        signed for ``service``."""
        request = AWSRequest(method=method, url=url, headers=dict(headers))
        frozen = self._credentials.get_frozen_credentials()
        _PrehashedSigV4(frozen, self.region, digest, service).add_auth(request)
        return {name: str(value) for name, value in request.headers.items()}
