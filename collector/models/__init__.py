"""Wire models (pydantic), named for the shapes of the interface spec."""
