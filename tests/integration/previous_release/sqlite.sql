-- The previous release's schema on sqlite as its svckit.db.migrate created it (captured
-- from that release at commit 6b9fc9c), with each service's schema_version table at 1.

CREATE TABLE IF NOT EXISTS auth_schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL);

CREATE TABLE auth_accounts (
	id VARCHAR(40) NOT NULL,
	name VARCHAR(200) NOT NULL,
	mode VARCHAR(8) NOT NULL,
	status VARCHAR(16) NOT NULL,
	admin_emails TEXT NOT NULL,
	daily_search_allowance BIGINT NOT NULL,
	created_at FLOAT NOT NULL,
	updated_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE TABLE auth_audit_events (
	seq INTEGER NOT NULL,
	id VARCHAR(40) NOT NULL,
	account_id VARCHAR(40) NOT NULL,
	key_id VARCHAR(40) NOT NULL,
	action VARCHAR(64) NOT NULL,
	actor_user VARCHAR(200) NOT NULL,
	actor_source VARCHAR(100) NOT NULL,
	occurred_at FLOAT NOT NULL,
	"before" TEXT NOT NULL,
	"after" TEXT NOT NULL,
	PRIMARY KEY (seq),
	UNIQUE (id)
);

CREATE INDEX auth_audit_account ON auth_audit_events (account_id, seq);

CREATE TABLE auth_travellers (
	id VARCHAR(40) NOT NULL,
	account_id VARCHAR(40) NOT NULL,
	environment VARCHAR(8) NOT NULL,
	partner_ref VARCHAR(64) NOT NULL,
	created_at FLOAT NOT NULL,
	PRIMARY KEY (id),
	CONSTRAINT auth_travellers_ref UNIQUE (account_id, environment, partner_ref)
);

CREATE TABLE auth_search_usage (
	account_id VARCHAR(40) NOT NULL,
	day VARCHAR(10) NOT NULL,
	used BIGINT NOT NULL,
	threshold_sent BOOLEAN NOT NULL,
	PRIMARY KEY (account_id, day)
);

CREATE TABLE auth_outbox (
	seq INTEGER NOT NULL,
	id VARCHAR(40) NOT NULL,
	account_id VARCHAR(40) NOT NULL,
	environment VARCHAR(8) NOT NULL,
	type VARCHAR(64) NOT NULL,
	state VARCHAR(64) NOT NULL,
	data TEXT NOT NULL,
	created_at FLOAT NOT NULL,
	sent_at FLOAT,
	attempts INTEGER DEFAULT '0' NOT NULL,
	next_attempt_at FLOAT NOT NULL,
	last_error VARCHAR(500) DEFAULT '' NOT NULL,
	PRIMARY KEY (seq),
	UNIQUE (id)
);

CREATE INDEX auth_outbox_pending ON auth_outbox (sent_at, next_attempt_at);

CREATE TABLE auth_keys (
	id VARCHAR(40) NOT NULL,
	account_id VARCHAR(40) NOT NULL,
	environment VARCHAR(8) NOT NULL,
	name VARCHAR(200) NOT NULL,
	scopes TEXT NOT NULL,
	allowed_sources TEXT NOT NULL,
	hint VARCHAR(40) NOT NULL,
	secret_hash VARCHAR(64) NOT NULL,
	created_at FLOAT NOT NULL,
	expires_at FLOAT,
	revoked_at FLOAT,
	revoke_reason VARCHAR(500),
	last_used_at FLOAT,
	rotated_to_key_id VARCHAR(40) DEFAULT '' NOT NULL,
	rotated_from_key_id VARCHAR(40) DEFAULT '' NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(account_id) REFERENCES auth_accounts (id),
	UNIQUE (secret_hash)
);

CREATE INDEX auth_keys_account ON auth_keys (account_id, created_at, id);

CREATE TABLE IF NOT EXISTS wh_schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL);

CREATE TABLE wh_endpoints (
	id VARCHAR(64) NOT NULL,
	account_id VARCHAR(64) NOT NULL,
	environment VARCHAR(16) NOT NULL,
	url TEXT NOT NULL,
	events TEXT NOT NULL,
	description TEXT NOT NULL,
	status VARCHAR(16) NOT NULL,
	disabled_reason TEXT NOT NULL,
	secrets TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	deleted_at BIGINT,
	PRIMARY KEY (id)
);

CREATE INDEX wh_endpoints_scope ON wh_endpoints (account_id, environment, created_at);

CREATE TABLE wh_events (
	seq INTEGER NOT NULL,
	id VARCHAR(64) NOT NULL,
	account_id VARCHAR(64) NOT NULL,
	environment VARCHAR(16) NOT NULL,
	type VARCHAR(64) NOT NULL,
	state VARCHAR(64) NOT NULL,
	created_at BIGINT NOT NULL,
	envelope BLOB NOT NULL,
	idempotency_key VARCHAR(255),
	PRIMARY KEY (seq),
	UNIQUE (id)
);

CREATE UNIQUE INDEX wh_events_idem ON wh_events (account_id, environment, idempotency_key);

CREATE INDEX wh_events_scope ON wh_events (account_id, environment, seq);

CREATE TABLE wh_deliveries (
	id VARCHAR(64) NOT NULL,
	event_id VARCHAR(64) NOT NULL,
	endpoint_id VARCHAR(64) NOT NULL,
	account_id VARCHAR(64) NOT NULL,
	environment VARCHAR(16) NOT NULL,
	event_type VARCHAR(64) NOT NULL,
	status VARCHAR(16) NOT NULL,
	attempt_count INTEGER NOT NULL,
	schedule_count INTEGER NOT NULL,
	due_at BIGINT,
	next_attempt_at BIGINT,
	lease_owner VARCHAR(64),
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX wh_deliveries_endpoint ON wh_deliveries (endpoint_id, created_at);

CREATE INDEX wh_deliveries_event ON wh_deliveries (event_id);

CREATE INDEX wh_deliveries_due ON wh_deliveries (status, next_attempt_at);

CREATE INDEX wh_deliveries_scope ON wh_deliveries (account_id, environment, created_at);

CREATE TABLE wh_attempts (
	id VARCHAR(64) NOT NULL,
	delivery_id VARCHAR(64) NOT NULL,
	endpoint_id VARCHAR(64) NOT NULL,
	event_id VARCHAR(64) NOT NULL,
	account_id VARCHAR(64) NOT NULL,
	environment VARCHAR(16) NOT NULL,
	attempt_number INTEGER NOT NULL,
	outcome VARCHAR(16) NOT NULL,
	response_status INTEGER NOT NULL,
	response_body TEXT NOT NULL,
	request_headers TEXT NOT NULL,
	latency_ms FLOAT NOT NULL,
	error TEXT NOT NULL,
	attempted_at BIGINT NOT NULL,
	manual BOOLEAN NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX wh_attempts_scope ON wh_attempts (account_id, environment, attempted_at);

CREATE INDEX wh_attempts_delivery ON wh_attempts (delivery_id);

CREATE INDEX wh_attempts_time ON wh_attempts (attempted_at);

CREATE TABLE wh_alerts (
	id VARCHAR(64) NOT NULL,
	account_id VARCHAR(64) NOT NULL,
	environment VARCHAR(16) NOT NULL,
	endpoint_id VARCHAR(64) NOT NULL,
	url TEXT NOT NULL,
	reason TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	sent_at BIGINT,
	error TEXT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX wh_alerts_pending ON wh_alerts (sent_at);

CREATE TABLE IF NOT EXISTS edge_schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL);

CREATE TABLE edge_idempotency (
	account_id VARCHAR(64) NOT NULL,
	environment VARCHAR(16) NOT NULL,
	idem_key VARCHAR(255) NOT NULL,
	request_hash VARCHAR(64) NOT NULL,
	state VARCHAR(16) NOT NULL,
	status_code INTEGER,
	body TEXT,
	headers TEXT,
	created_at FLOAT NOT NULL,
	claimed_at FLOAT NOT NULL,
	PRIMARY KEY (account_id, environment, idem_key)
);

CREATE INDEX IF NOT EXISTS edge_idempotency_created ON edge_idempotency (created_at);

INSERT INTO auth_schema_version (version, description) VALUES (1, 'accounts, keys, audit, travellers, usage, outbox');

INSERT INTO wh_schema_version (version, description) VALUES (1, 'endpoints, events, deliveries, attempts, alerts');

INSERT INTO edge_schema_version (version, description) VALUES (1, 'edge_idempotency');

