"""The agent fixtures (a built zipapp, real job directories) shared with tests/agent."""

from tests.agent.conftest import agent_pyz, make_job  # noqa: F401
