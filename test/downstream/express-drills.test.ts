/** The drills of issue 10 through `idem/express` over the real ledger service. */
import { startExpressDrillApp } from './apps.js';
import { describeMiddlewareDrills } from './middleware-drills.js';

describeMiddlewareDrills('express', startExpressDrillApp);
