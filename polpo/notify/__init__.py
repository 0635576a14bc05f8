"""Outbound notifications: typed channels (:mod:`.config`), deliverers (:mod:`.channels`), routing (:mod:`.router`)."""
