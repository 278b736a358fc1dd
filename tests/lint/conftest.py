"""The agent fixtures (a built zipapp, real job directories) for the input-bound tests."""

from tests.agent.conftest import agent_pyz, make_job  # noqa: F401
