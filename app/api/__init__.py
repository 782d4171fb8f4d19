"""The HTTP API (Litestar): ``create_app`` in ``app.api.app`` builds it.

How to add an endpoint
----------------------
1. Put the handler in the module of its resource (``app/api/<resource>.py``) and list it in
   that module's ``ROUTES``; a new module is added to ``app/api/app.py``. Paths are relative
   to ``/api/v1``; name the project path parameter ``{project:str}``.
2. Declare the least role it needs: ``opt=requires(Role.EDITOR)`` (or ``PLATFORM_ADMIN``).
   Reads default to viewer; writes that declare nothing are platform-admin only. The guard
   (``app.api.auth``) has already authenticated, resolved ``{project}`` (404 when invisible)
   and checked the role before your handler runs.
3. Take the body as ``data: SomeStruct`` (a ``app.domain.specs`` struct). The
   ``before_request`` hook has already answered 415/413/400/422 (all invalid fields) for it.
   Rules msgspec cannot express: collect them and ``raise ValidationFailed([...])``.
4. Take ``caller: Caller`` and ``db: Database`` as dependencies. Do the work in ONE
   transaction: ``async with db.transaction() as conn:`` and call store functions with
   ``conn``; reads may use ``db.connection()``. Every write records an event
   (``app.store.audit.record_event``, actor ``caller.actor``) and, if it needs reconciling,
   rings ``ring_doorbell`` in that same transaction.
5. Creates answer through ``respond_once`` (``app.api.idempotency``) for ``Idempotency-Key``;
   reconciled creates answer 202 with ``Location``. PUT/PATCH/DELETE honour ``If-Match``
   (``app.api.preconditions``). Lists take ``limit: Limit = DEFAULT_LIMIT, cursor: CursorParam =
   None`` and return ``{"items", "next_cursor"}`` (``app.api.paging``).
6. Errors: raise ``app.domain.errors`` classes; the one handler in ``app.api.problems`` renders
   them. Document them with ``responses=problems(...)`` (``app.api.docs``).
"""
