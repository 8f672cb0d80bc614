CREATE TABLE "idem_events" (
	"scope" text NOT NULL,
	"id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"key" text NOT NULL,
	"version" integer NOT NULL,
	"type" text NOT NULL,
	"at" timestamp (6) with time zone NOT NULL,
	"actor" text NOT NULL,
	"attempt" integer NOT NULL,
	"detail" jsonb NOT NULL,
	CONSTRAINT "idem_events_pkey" PRIMARY KEY("scope","id")
);
--> statement-breakpoint
CREATE TABLE "idem_operations" (
	"scope" text NOT NULL,
	"key" text NOT NULL,
	"id" uuid NOT NULL,
	"fingerprint" text NOT NULL,
	"effect" text NOT NULL,
	"status" text NOT NULL,
	"attempt" integer NOT NULL,
	"version" integer NOT NULL,
	"lease_id" uuid,
	"lease_owner" text,
	"lease_expires_at" timestamp (3) with time zone,
	"dispatched_at" timestamp (3) with time zone,
	"lease_recovered" boolean DEFAULT false NOT NULL,
	"request" jsonb,
	"result" jsonb,
	"metadata" jsonb NOT NULL,
	"approval_state" text,
	"approval_deadline" timestamp (3) with time zone,
	"approval_decided_by" text,
	"approval_decided_at" timestamp (3) with time zone,
	"approval_note" text,
	"resolution_by" text,
	"resolution_at" timestamp (3) with time zone,
	"resolution_note" text,
	"retention_ms" bigint NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL,
	"completed_at" timestamp (3) with time zone,
	"retained_until" timestamp (3) with time zone,
	CONSTRAINT "idem_operations_pkey" PRIMARY KEY("scope","key"),
	CONSTRAINT "idem_operations_status_check" CHECK (status IN ('pending_approval', 'ready', 'in_progress', 'outcome_unknown', 'succeeded', 'failed', 'rejected')),
	CONSTRAINT "idem_operations_effect_check" CHECK (effect IN ('read', 'idempotent_write', 'non_idempotent_write', 'unclassified')),
	CONSTRAINT "idem_operations_lease_check" CHECK (status <> 'in_progress' OR (lease_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);
--> statement-breakpoint
CREATE INDEX "idem_events_operation_idx" ON "idem_events" USING btree ("scope","operation_id","version","at");--> statement-breakpoint
CREATE INDEX "idem_operations_id_idx" ON "idem_operations" USING btree ("id");--> statement-breakpoint
CREATE INDEX "idem_operations_scope_created_idx" ON "idem_operations" USING btree ("scope","created_at","id");--> statement-breakpoint
CREATE INDEX "idem_operations_lease_expiry_idx" ON "idem_operations" USING btree ("lease_expires_at") WHERE status = 'in_progress';--> statement-breakpoint
CREATE INDEX "idem_operations_approval_deadline_idx" ON "idem_operations" USING btree ("approval_deadline") WHERE status = 'pending_approval';--> statement-breakpoint
CREATE INDEX "idem_operations_retained_idx" ON "idem_operations" USING btree ("retained_until") WHERE status IN ('succeeded', 'failed', 'rejected', 'ready');--> statement-breakpoint
CREATE INDEX "idem_operations_open_idx" ON "idem_operations" USING btree ("scope","status","created_at") WHERE status IN ('pending_approval', 'ready', 'in_progress', 'outcome_unknown');