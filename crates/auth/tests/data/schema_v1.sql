-- The auth schema as version 1 wrote it (frozen: upgrade tests start from it).

CREATE TABLE auth_users (
    user_id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE auth_sessions (
    digest BLOB PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES auth_users(user_id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE auth_apps (
    client_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    callback_url TEXT NOT NULL,
    scopes TEXT NOT NULL,
    secret_digest BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE auth_codes (
    digest BLOB PRIMARY KEY,
    client_id INTEGER NOT NULL REFERENCES auth_apps(client_id),
    user_id INTEGER NOT NULL REFERENCES auth_users(user_id),
    redirect_uri TEXT NOT NULL,
    redirect_uri_given INTEGER NOT NULL,
    scopes TEXT NOT NULL,
    grant_id BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
) WITHOUT ROWID;
CREATE TABLE auth_tokens (
    digest BLOB PRIMARY KEY,
    kind TEXT NOT NULL,
    client_id INTEGER NOT NULL REFERENCES auth_apps(client_id),
    user_id INTEGER REFERENCES auth_users(user_id),
    scopes TEXT NOT NULL,
    grant_id BLOB,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER,
    revoked_reason TEXT
) WITHOUT ROWID;
CREATE INDEX auth_tokens_by_grant ON auth_tokens(grant_id);
CREATE INDEX auth_tokens_by_client ON auth_tokens(client_id, kind);
