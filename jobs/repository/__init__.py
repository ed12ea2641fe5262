"""Memory follows the git repository (issue 49): who a repository is, where a session happened, and
which of its decisions are in force on the branch a session starts on."""
