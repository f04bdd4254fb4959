"""Access: who is calling (a key or a signed-in user), in which project, and what each may do.

``principal.py`` holds the shapes shared by the enforcement (``api/access.py``) and the
accounts service that signs people in; ``permissions.py`` the one table from route to the
scope a key needs and the role a user needs (docs/security.md, "Roles and scopes").
"""
