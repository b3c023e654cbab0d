"""The markdown report of a session (markdown) and its metric plot; it reads the state and
opens no repository.

May import: core."""
