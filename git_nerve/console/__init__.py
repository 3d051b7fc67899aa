"""`git nerve console`: a live web page of the whole repository's work, on 127.0.0.1 only.

* :mod:`.app`: the Starlette routes, the uvicorn server, the watcher that
  turns bus changes into server-sent events;
* :mod:`.security`: the token, Host, Origin and content-type checks;
* :mod:`.state`: what the page shows, read through the features' functions;
* :mod:`.actions`: what its buttons do (tell, approve, request changes, merge);
* ``page.html``: the page (one static file, no build step).

Nothing on the hook or heartbeat paths imports this package.
"""
