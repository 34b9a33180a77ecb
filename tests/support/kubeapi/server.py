"""An in-process Kubernetes API server for tests: real REST list/watch over loopback HTTP.

with KubeApiServer() as api:
    client = kubernetes.client.ApiClient(api.client_configuration())
    ...
    api.apply({"apiVersion": "v1", "kind": "Service", ...})   # change the world
    api.cut_watches()                                         # break every watch
    api.stop(); api.start()                                   # an outage, same port
    api.stop(black_hole=True)                                 # connects, never answers
    api.withdraw_kind("httproutes"); api.restore_kind(...)    # 404 for a while
    api.silence_next_watches("/services")                     # a watch that says nothing
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from tests.support.kubeapi import errors
from tests.support.kubeapi.api import RestApi, Settings
from tests.support.kubeapi.handler import ApiHttpServer
from tests.support.kubeapi.kubeconfig import client_configuration, write_kubeconfig
from tests.support.kubeapi.resources import ResourceRegistry
from tests.support.kubeapi.store import Obj, ObjectStore
from tests.support.kubeapi.traffic import InjectedFailures, Outages, RequestCounts
from tests.support.kubeapi.watch import OpenWatches

if TYPE_CHECKING:
    import kubernetes.client

DEFAULT_TOKEN = "kubeapi-test-token"
# The namespaces every cluster starts with.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class KubeApiServer:
    """A Kubernetes API server on 127.0.0.1 whose world tests can also change directly.

    It listens from construction (port 0 picks a free port; see `url`). Thread-safe. The
    store outlives `stop()`, so `start()` brings the same data back on the same port.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = DEFAULT_TOKEN,
        bookmark_interval: float = 1.0,
        history_limit: int = 2000,
        too_large_wait: float = 3.0,
        default_watch_timeout: float = 60.0,
        namespaces: tuple[str, ...] = INITIAL_NAMESPACES,
    ) -> None:
        self.token = token
        self.registry = ResourceRegistry()
        self.store = ObjectStore(self.registry, history_limit=history_limit)
        self.counts = RequestCounts()
        self.failures = InjectedFailures()
        self.outages = Outages()
        self.watches = OpenWatches()
        settings = Settings(
            token=token,
            bookmark_interval=bookmark_interval,
            too_large_wait=too_large_wait,
            default_watch_timeout=default_watch_timeout,
        )
        self.rest = RestApi(
            self.store,
            settings,
            lambda: f"{self.host}:{self.port}",
            self.counts,
            self.failures,
            self.outages,
        )
        self.host = host
        self.port = port
        self._lifecycle = threading.Lock()
        self._http: ApiHttpServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._black_hole: socket.socket | None = None
        for namespace in namespaces:
            self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        self.start()

    # ---------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        with self._lifecycle:
            return self._http is not None

    def start(self) -> None:
        """Listens again (on the same port after a `stop()`); a no-op when running."""
        with self._lifecycle:
            if self._http is not None:
                return
            if self._black_hole is not None:
                self._black_hole.close()  # connections waiting in its backlog are reset
                self._black_hole = None
            http = ApiHttpServer((self.host, self.port), self.rest, self.watches)
            self.port = http.server_address[1]
            thread = threading.Thread(
                target=http.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"kubeapi-{self.port}",
                daemon=True,
            )
            thread.start()
            self._http, self._serve_thread = http, thread

    def stop(self, *, black_hole: bool = False) -> None:
        """The API server goes away: open connections drop, new ones are refused; or, with
        `black_hole`, new ones connect (the kernel completes the handshake) and are never
        answered, as behind a load balancer whose backend vanished."""
        with self._lifecycle:
            http, thread = self._http, self._serve_thread
            self._http = self._serve_thread = None
        if http is None or thread is None:
            return
        http.shutdown()  # no more accepts
        self.watches.refuse_new(True)
        self.watches.cut_all()
        http.drop_connections()
        http.server_close()  # closes the listener, joins handler threads
        thread.join()
        self.watches.refuse_new(False)
        if black_hole:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(64)  # never accepted
            with self._lifecycle:
                self._black_hole = listener

    def withdraw_kind(self, resource: str) -> None:
        """The server stops serving a resource (a plural, e.g. "httproutes") without deleting
        its objects, as when a CRD or an aggregated API is briefly unavailable: every
        request for it answers 404, and its open watches end."""
        self.outages.withdraw(resource)
        self.watches.cut_all(resource)

    def restore_kind(self, resource: str) -> None:
        """Serves a withdrawn resource again, objects and history as they were."""
        self.outages.restore(resource)

    def silence_next_watches(self, path_substring: str, times: int = 1) -> None:
        """The next `times` watch requests whose path-and-query contain `path_substring` get
        their 200 and headers, then nothing at all (no event, no bookmark) until cut."""
        self.outages.silence(path_substring, times)

    def close(self) -> None:
        self.stop()
        with self._lifecycle:
            listener, self._black_hole = self._black_hole, None
        if listener is not None:
            listener.close()

    def __enter__(self) -> KubeApiServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------- client set-up

    def client_configuration(self) -> kubernetes.client.Configuration:
        """A `kubernetes.client.Configuration` for this server (plain HTTP, bearer token)."""
        return client_configuration(self.url, self.token)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig file whose current context points at this server."""
        return write_kubeconfig(path, self.url, self.token, namespace)

    # -------------------------------------------------------------- test controls

    def compact(self) -> int:
        """Forgets history: watches and lists from older resourceVersions get 410 Expired."""
        return self.store.compact()

    def cut_watches(self) -> int:
        """Closes every open watch connection mid-stream; returns how many were cut."""
        return self.watches.cut_all()

    def open_watches(self) -> int:
        return self.watches.count()

    def fail_next(
        self,
        method: str | None,
        path_substring: str,
        status: int,
        *,
        times: int = 1,
        message: str | None = None,
    ) -> None:
        """Answers the next `times` requests whose method matches (None: any) and whose
        path-and-query contains `path_substring` with a `Status` error of that code."""
        self.failures.add(method, path_substring, status, times=times, message=message)

    def request_count(self, verb: str, resource: str) -> int:
        """Requests seen, e.g. ("list", "services"), ("update", "gateways/status")."""
        return self.counts.get(verb, resource)

    def request_counts(self) -> Counter[tuple[str, str]]:
        return self.counts.snapshot()

    def reset_counts(self) -> None:
        self.counts.reset()

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    # --------------------------------------------------- the world, without HTTP

    def apply(self, obj: Obj) -> Obj:
        """Creates or overwrites an object exactly as given (status too), like a write
        straight to storage: no resourceVersion check, no namespace admission."""
        rtype, _ = self.registry.for_object(obj)
        return self.store.apply(rtype, obj)

    def get(self, kind: str, name: str, namespace: str = "default") -> Obj | None:
        """The stored object or None; `kind` may be a kind, plural or short name."""
        rtype = self.registry.find(kind)
        try:
            return self.store.get(rtype, namespace if rtype.namespaced else "", name)
        except errors.ApiError:
            return None

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        rtype = self.registry.find(kind)
        items, _ = self.store.list(rtype, namespace if rtype.namespaced else None)
        return items

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        """Removes an object at once, finalizers or not; False when it did not exist."""
        rtype = self.registry.find(kind)
        try:
            self.store.delete(
                rtype, namespace if rtype.namespaced else "", name, honour_finalizers=False
            )
        except errors.ApiError:
            return False
        return True

    def __repr__(self) -> str:
        return f"KubeApiServer({self.url}, resourceVersion={self.resource_version})"
