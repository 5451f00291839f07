"""PostgreSQL plumbing shared by both halves: DSNs, connections, named SQL files, the
embedded/system servers, scratch databases, and which database a command targets."""
