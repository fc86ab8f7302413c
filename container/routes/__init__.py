"""HTTP and WebSocket routes, one module per protocol; each handler reads request.app.state."""
