import os

# Tests make commits; give git an identity without touching anyone's config.
for key, value in {"GIT_AUTHOR_NAME": "bisect-ngc tests", "GIT_AUTHOR_EMAIL": "tests@example.com",
                   "GIT_COMMITTER_NAME": "bisect-ngc tests",
                   "GIT_COMMITTER_EMAIL": "tests@example.com"}.items():
    os.environ.setdefault(key, value)
