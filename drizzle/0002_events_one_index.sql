-- The events keep one index instead of two: (scope, operation_id, version, id) is how they
-- are read and purged, and every transition wrote one more B-tree entry for (scope, id).
-- Building the new key locks idem_events for as long as that takes on a large table.
DROP INDEX "idem_events_operation_idx";--> statement-breakpoint
ALTER TABLE "idem_events" DROP CONSTRAINT "idem_events_pkey";
--> statement-breakpoint
ALTER TABLE "idem_events" ADD CONSTRAINT "idem_events_pkey" PRIMARY KEY("scope","operation_id","version","id");