//! Links to live systems: WebSocket listener, request correlator, reconnect backoff.
