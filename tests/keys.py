"""The keys the tests use, in one place: the collector's default project key and the stubs'."""

# The key ``Settings.init_api_key`` gives the default project in every test collector.
DEFAULT_KEY = "pr-test-default-key"
DEFAULT_AUTH = {"Authorization": f"Bearer {DEFAULT_KEY}"}

# What a collector under test sends its provider stubs (they accept any key).
OPENAI_KEY = "sk-stub-openai"
ANTHROPIC_KEY = "sk-ant-stub"
