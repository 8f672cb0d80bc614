/** The drills of issue 10 through `idem/fastify` over the real ledger service. */
import { startFastifyDrillApp } from './apps.js';
import { describeMiddlewareDrills } from './middleware-drills.js';

describeMiddlewareDrills('fastify', startFastifyDrillApp);
