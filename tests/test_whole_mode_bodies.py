"""``context_updates: whole`` is today's behaviour, byte for byte.

The golden cases were pinned under ``whole`` until the example switched to ``sections``
(issue 44). Their bodies of that time are pinned here by digest: each case replayed
under the example with ``context_updates: whole`` must give exactly those bodies, on
every provider, so the whole mode can never drift while the golden files follow the
example.
"""

from __future__ import annotations

import hashlib

import pytest
from conv_helpers import REPO, mode_bundle
from prefixlock.review.replay import replay_bodies
from prefixlock.review.scenario import load_scenario

#: case -> provider -> (bodies, SHA-256 over each body's SHA-256 in call order), as the
#: golden files held them at the last commit before the example used ``sections``.
WHOLE_BODIES: dict[str, dict[str, tuple[int, str]]] = {
    "identical-context": {
        "anthropic": (3, "3a2bb9ca956412bad27f0b85f400262f46147fc495945f0b6f99dd3e892613b1"),
        "bedrock-converse": (3, "94db869a90c79351bd69f51ffd948df89637d66e1c6efd655d47ee6ca27e6170"),
        "gemini": (3, "81e18057f16d732c1e9a42eec7b796afb609587d684a454e9379124392d8a7f1"),
        "openai-chat": (3, "480f845ad1d393b4572a153ce27af2d2a375ba3156dbade05b22f75cfcef36d6"),
        "openai-responses": (3, "417b3e46db3763f52b1c30d5c6b9945635397cb0a795e2a8c849edbff9a9a7f3"),
    },
    "changed-context": {
        "anthropic": (5, "0fd5797f11f0aef42343c2cc5087b27279689fba94a815872f6f23e69d51411b"),
        "bedrock-converse": (5, "cf3c8893d52e4d74c342bfedff158d3c799ba5e29dba5050d617a6b76e633482"),
        "gemini": (5, "b907583552d63529e5005b2a1ebc0a2ae642f1382a95ed0ccb6fd70d99045824"),
        "openai-chat": (5, "a450e7299add7ce215799f8fa91c01de22c2bb44cc10f26c4f919cbc90c08ea8"),
        "openai-responses": (5, "8ad36635572a985ebbdc7ee47bd1d5f742a7c03bcaa94204af0b6c52a8e30cb5"),
    },
    "context-revert": {
        "anthropic": (4, "12bc106249d019792d3c3239749db5cae802e04952c8ce4bca50e4c563b5a73c"),
        "bedrock-converse": (4, "3643efc6e5badc90880066e4e920c2a6192186d0b3497656f4882e439441291e"),
        "gemini": (4, "9ad9e5489b0319bf10ea71d7ca7afc0feae34090947179a0f74c8f38708fa667"),
        "openai-chat": (4, "88dbd40f3181bcc0ed804ebe88465d3ae0386d1db4c1d2ec7d89f91a69609c03"),
        "openai-responses": (4, "7637288eb409ca8ce08b4a4f372e7f770c5420eaa57485f225be0c321616018b"),
    },
    "automatic-compaction": {
        "anthropic": (8, "0765dd726580adeefb00720462a965cdc6d74a4002b8e382a1d675c81e313771"),
        "bedrock-converse": (8, "2f55de89c98b8d66d7f1d01f14864eda5143200ff600fc0ce0ab7575b130701f"),
        "gemini": (8, "9cf1228ccc36d2128793aa4d40983ec945c3d85d9a0c165a082e2725bdaea00e"),
        "openai-chat": (8, "32111ff7a872eb9f4b752f11cc5102ff297fe3ea38988b22471d596888c06207"),
        "openai-responses": (8, "12069671bd1ed7f26c49999a558df91de1441a3d51b8ef8643eaeb6d3d0d6888"),
    },
    "manual-compaction": {
        "anthropic": (5, "4796e877dd1fd0059d94e560b542aa8ce815ebccc39575b5c7dabf8d9194f6f7"),
        "bedrock-converse": (5, "223d28f4e1e4adf9cc1bde577733a73b3a37168037110e8043de6cb88c695830"),
        "gemini": (5, "d34547b31244d1ba4f73df62042a05633e3f0bb369aeebb4475e96b6c26c9b45"),
        "openai-chat": (5, "b0a0d37c64146dabc774d8c08fb4094a8144f2d98dc8d9de841a7a1a24506a3b"),
        "openai-responses": (5, "8175f07523e079c416a21be0820bbfefb0146a4c0afe36a31fe7132b9d239677"),
    },
    "checkpoint-round-trip": {
        "anthropic": (7, "cdfabafd67bc5629bdf415463d4246e8f008e2d3eaedeba31310c1f891734c61"),
        "bedrock-converse": (7, "64f8e3306505344c12446f3251a4dcbda3dd5fbac50e70a02b6c09c4ce512816"),
        "gemini": (7, "d9da2a79198deb773ea53b85340fb84cb1cbf0dc680a97612e55a68510c64f73"),
        "openai-chat": (7, "9adb14a3120a33117558659d175a11be98578c01ffa2ec6164f971455b205f8e"),
        "openai-responses": (7, "2661ef4fdb8a0f590b43222577ecb26e747cc4d3be88b7da8f71dae96533850e"),
    },
    "mcp-order": {
        "anthropic": (4, "ca41b54f328c37df3583f323fc6cb636d2408e8a6c9042894bfdc5cceeda87b3"),
        "bedrock-converse": (4, "4c9a1afa77c69fa0e0ff6f00d5494150a465efd4f6f8ca911aefc3d08ac78d86"),
        "gemini": (4, "5155647fd3d81cc5de6c34dde6585e7f6040e05506effa0eb3c89a18a4ef2347"),
        "openai-chat": (4, "7bddf50f703ca16e8e5a15b90de2dbcdb0fbbe1cfa4d913e5efbe8bb80af75f8"),
        "openai-responses": (4, "9a2542b4041bde7e347faa19d2faaefd14d326ec04326d0b281bf83aaff1c3ce"),
    },
    "background-event": {
        "anthropic": (5, "aa76f7ab8c8723414a9e1a7e8be8497bca4e2803a1cc5471f2a179602e889fd2"),
        "bedrock-converse": (5, "3c02df17ed7e3efd2ae90a6fe37ce53348c8cda901e40c57d6c3368ec5f24b2e"),
        "gemini": (5, "6e209ed985a406c83a27ec7c44a0300dd61165af9770b5ed881883d7a6f53c71"),
        "openai-chat": (5, "0bc86b5211cab979c77e8f406cb8be17725282fe971050b805ccda8dbe987ca3"),
        "openai-responses": (5, "574408fcd684340c59e460def6ec21c09a41b64a292230609595ef1bd2d3b6a2"),
    },
    "injected-event": {
        "anthropic": (6, "d2c2d710dba34518356464b4a6f3e4d6d623ca97e9e0c22d064946f8b5dbce08"),
        "bedrock-converse": (6, "b8fb29ebb24a722e9753e7d60a8bbad18c7ba90db3cdb44de804a35341db4c61"),
        "gemini": (6, "5240567771ec8eb611f6697689007762cea5c4a2e6cd0dfe4dede9c0134abf22"),
        "openai-chat": (6, "9598d04e5c11df29361763822dea30564bc66a7b71f8b6ea8584d0c4ea7cc9d1"),
        "openai-responses": (6, "a4a1e365725f121bade7bd0b3834f7add30391ece0b7b0ae0bdb458e28d3caf2"),
    },
    "retry": {
        "anthropic": (9, "a97e0e6d7f193f7b7698236a7d372eab963183fa9abbdac95b989a274d65ce82"),
        "bedrock-converse": (9, "5aa8601ad33ac680fdcf218a81bcf86541d65b3509d06e9a76ac93069ccfa8dc"),
        "gemini": (9, "0f1fea980c23d9fa9d915c9fa022e26de6b7ec156b62ebace1d3beba250c9fc6"),
        "openai-chat": (9, "07c63636f9cc2e25591b2a3b65f9d520790864890d619c89a48a1c5eb04ecc4d"),
        "openai-responses": (9, "17e19334bdbef3cac58cd26b976fb94ac71fccf028bd1e12a5068fe1c72e3737"),
    },
    "long-session": {
        "anthropic": (31, "724ab05c8cf77d94e79ec9b8d2ce151a2cc74ea7efe88c9650b7032d3fa39789"),
        "bedrock-converse": (
            31,
            "a5474303519fd351124913c4a906bd4ee7ed1991f5c60185914aa57bec3ffb9f",
        ),
        "gemini": (31, "6032a78849d2b8b832178605fa4c044cdda89bb48b4b2460a02e6469d33bb63c"),
        "openai-chat": (31, "425b22f317aad6cf145466d37a803c0a201af8aead784c3c3e17f0ca354f9b8c"),
        "openai-responses": (
            31,
            "605feb27daf0040f46109c881f21333b79702a15fd02243080c05704f8cfbc32",
        ),
    },
}


def _digest(bodies: list[bytes]) -> tuple[int, str]:
    joined = hashlib.sha256()
    for body in bodies:
        joined.update(hashlib.sha256(body).digest())
    return len(bodies), joined.hexdigest()


@pytest.mark.parametrize("case", sorted(WHOLE_BODIES))
def test_whole_mode_replays_the_bodies_of_before_sections(case: str) -> None:
    scenario = load_scenario(REPO / "golden" / case / "scenario.yaml", bundle=mode_bundle("whole"))
    bodies = replay_bodies(scenario, sorted(WHOLE_BODIES[case]))
    assert {name: _digest(found) for name, found in bodies.items()} == WHOLE_BODIES[case]
